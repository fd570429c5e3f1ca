//go:build e2e

package e2e

// Attacks on virtual servers, against the real binary's listener with
// hand-built requests (the servers of startVirtualServers): paths that try
// to reach one server through another's, Mcp-Name headers naming another
// tool than the body, tools a server leaves out called by the names they
// have elsewhere, and fixed arguments smuggled past the curation.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestVirtualServersAttacks runs the attacks on one process.
func TestVirtualServersAttacks(t *testing.T) {
	v := startVirtualServers(t)
	t.Run("path confusion", func(t *testing.T) { v.attackPaths(t) })
	t.Run("Mcp-Name against the body", func(t *testing.T) { v.attackMcpName(t) })
	t.Run("tools left out", func(t *testing.T) { v.attackLeftOut(t) })
	t.Run("fixed arguments smuggled", func(t *testing.T) { v.attackFixed(t) })
	t.Run("calls as notifications and in batches", func(t *testing.T) { v.attackOddCalls(t) })
	t.Run("a default's argument in another case", func(t *testing.T) { v.attackDefaultCase(t) })
}

// addr is the listener's "host:port".
func (v *vservers) addr() string { return strings.TrimPrefix(v.srv.BaseURL, "http://") }

// attackPaths sends a tools/list and a tools/call of "order" with each
// server's token to paths that are not a server's path as configured
// but resemble one. The router answers each the same way whatever the
// token: a redirect to the cleaned path (http.ServeMux's, for a path
// holding "..", "." or "//"; nothing of MCP is done and nothing but the
// cleaned path is said), a 404 (an encoded slash, another case, a
// trailing slash, a path parameter: no server is there), or the server
// the path names once decoded, which serves only a token for itself.
// So no path lets a token for one server reach another server's tools,
// nor a virtual server's token the root's.
func (v *vservers) attackPaths(t *testing.T) {
	cases := []struct {
		name, target string
		redirect     string // the Location of the 307, if it is one
		servedAs     string // the server serving it, if one does
	}{
		{name: "dot-dot from a to b", target: "/mcp/a/../b", redirect: "/mcp/b"},
		{name: "dot-dot from c to a", target: "/mcp/a/b/..", redirect: "/mcp/a"},
		{name: "dot-dot to the root", target: "/mcp/a/..", redirect: "/mcp"},
		{name: "dot segment and trailing slash", target: "/mcp/a/./", redirect: "/mcp/a/"},
		{name: "double slash first", target: "//mcp/a", redirect: "/mcp/a"},
		{name: "double slash inside", target: "/mcp//b", redirect: "/mcp/b"},
		{name: "encoded dot-dot", target: "/mcp/a/%2e%2e/b"},
		{name: "encoded slash to c", target: "/mcp/a%2fb"},
		{name: "encoded slash after the root", target: "/mcp%2Fa"},
		{name: "double-encoded slash", target: "/mcp/a%252fb"},
		{name: "upper case", target: "/mcp/A"},
		{name: "upper-case root", target: "/MCP/a"},
		{name: "trailing slash", target: "/mcp/a/"},
		{name: "root's trailing slash", target: "/mcp/"},
		{name: "path parameter", target: "/mcp/a;x"},
		{name: "encoded letter", target: "/mcp/%61", servedAs: "a"},
		{name: "query naming another server", target: "/mcp/b?path=/mcp/a", servedAs: "b"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, owner := range []string{"root", "a", "b", "c"} {
				token := v.token[owner]
				id := fmt.Sprintf("PATH-%d-%s", i, owner)
				list := modernRequest(1, "tools/list", nil)
				call := modernRequest(2, "tools/call", map[string]any{"name": "order", "arguments": map[string]any{"order_id": id}})
				for _, req := range []struct {
					body   []byte
					header http.Header
				}{
					{list, withHeaders(modernHeaders(token, "tools/list", ""), "Content-Type", "application/json", "Accept", "application/json, text/event-stream")},
					{call, withHeaders(modernHeaders(token, "tools/call", "order"), "Content-Type", "application/json", "Accept", "application/json, text/event-stream")},
				} {
					resp, body := rawExchange(t, v.addr(), http.MethodPost, c.target, req.header, req.body)
					method := req.header.Get("Mcp-Method")
					what := fmt.Sprintf("%s %s with %s's token", method, c.target, owner)
					switch {
					case c.redirect != "":
						if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != c.redirect {
							t.Errorf("%s: %d to %q, want 307 to %q: %s", what, resp.StatusCode, resp.Header.Get("Location"), c.redirect, body)
						}
						if len(body) > 0 || resp.Header.Get("WWW-Authenticate") != "" {
							t.Errorf("%s: the redirect says more than where to: WWW-Authenticate %q, body %q", what, resp.Header.Get("WWW-Authenticate"), body)
						}
					case c.servedAs == "":
						if resp.StatusCode != http.StatusNotFound || string(body) != "404 page not found\n" || resp.Header.Get("WWW-Authenticate") != "" {
							t.Errorf("%s: %d %q (WWW-Authenticate %q), want the plain 404", what, resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"))
						}
					case c.servedAs != owner:
						if resp.StatusCode != http.StatusUnauthorized {
							t.Errorf("%s: %d, want 401 from server %s: %s", what, resp.StatusCode, c.servedAs, body)
						} else if p := challengeParams(t, resp.Header); p["resource_metadata"] != v.metadataURL(c.servedAs) {
							t.Errorf("%s: WWW-Authenticate %q, want server %s's metadata", what, resp.Header.Get("WWW-Authenticate"), c.servedAs)
						}
					case method == "tools/list":
						if resp.StatusCode != http.StatusOK {
							t.Fatalf("%s: %d: %s", what, resp.StatusCode, body)
						}
						var list struct{ Tools []struct{ Name string } }
						if err := json.Unmarshal(rpcResult(t, rpcMessages(t, resp.Header.Get("Content-Type"), body), "1"), &list); err != nil {
							t.Fatal(err)
						}
						var names []string
						for _, tl := range list.Tools {
							names = append(names, tl.Name)
						}
						slices.Sort(names)
						if !slices.Equal(names, v.tools[owner]) {
							t.Errorf("%s lists %v, want server %s's %v", what, names, owner, v.tools[owner])
						}
					default:
						if resp.StatusCode != http.StatusOK {
							t.Fatalf("%s: %d: %s", what, resp.StatusCode, body)
						}
						checkToolText(t, rpcResult(t, rpcMessages(t, resp.Header.Get("Content-Type"), body), "2"), id+": done")
					}
				}
				if c.servedAs == owner && owner != "root" && owner != "c" {
					v.spy.checkSpyArgs(t, id, "lookup_order", wantOrderArgs(owner, id))
				} else {
					v.spy.checkSpyNothing(t, id)
				}
			}
		})
	}
}

// rpcError returns the code and message of the JSON-RPC error answering
// the request with the given id, failing the test if the answer is not
// an error.
func rpcError(t *testing.T, resp *http.Response, body []byte, id string) (int, string) {
	t.Helper()
	for _, m := range rpcMessages(t, resp.Header.Get("Content-Type"), body) {
		if string(m.ID) != id {
			continue
		}
		if m.Error == nil {
			t.Fatalf("response %s: a result, want an error: %s", id, m.Result)
		}
		return m.Error.Code, m.Error.Message
	}
	t.Fatalf("no response with id %s (status %d): %s", id, resp.StatusCode, body)
	return 0, ""
}

// attackMcpName sends 2026-07-28 tools/calls of server a's renamed tool
// whose Mcp-Name header names another tool than the body: the SDK's
// header mismatch (400, -32020) whatever the names are to the server, and
// the tool is not called. The same headers on a 2025 session, whose
// revision has no Mcp-Name, change nothing: the body's name decides, so a
// header naming an exposed tool does not let the body call a hidden one.
func (v *vservers) attackMcpName(t *testing.T) {
	legacy := legacySession(t, v.url("a"), v.token["a"], "2025-11-25")
	for i, c := range []struct{ header, body string }{
		{"spy_lookup_order", "order"}, // the tool's original name
		{"lookup_order", "order"},     // its name upstream
		{"say", "order"},              // another tool's exposed name
		{"Order", "order"},            // another case
		{"order", "spy_lookup_order"}, // the exposed name over the original
		{"order", "ORDER"},
		{"order", "say"},
	} {
		id := fmt.Sprintf("HDR-%d", i)
		body := modernRequest(2, "tools/call", map[string]any{"name": c.body, "arguments": map[string]any{"order_id": id}})
		resp, b := postMCP(t, http.DefaultClient, v.url("a"), string(body), modernHeaders(v.token["a"], "tools/call", c.header))
		code, msg := rpcError(t, resp, b, "2")
		if resp.StatusCode != http.StatusBadRequest || code != sdk.CodeHeaderMismatch || !strings.Contains(msg, "Mcp-Name") {
			t.Errorf("Mcp-Name %q, body %q: %d, error %d %q; want 400, %d naming Mcp-Name", c.header, c.body, resp.StatusCode, code, msg, sdk.CodeHeaderMismatch)
		}
		v.spy.checkSpyNothing(t, id)

		id = fmt.Sprintf("HDR-legacy-%d", i)
		body = legacyRequest(2, "tools/call", map[string]any{"name": c.body, "arguments": map[string]any{"order_id": id}})
		resp, b = postMCP(t, http.DefaultClient, v.url("a"), string(body), withHeaders(legacy, "Mcp-Method", "tools/call", "Mcp-Name", c.header))
		if slices.Contains(v.tools["a"], c.body) {
			if c.body == "order" {
				checkToolText(t, rpcResult(t, rpcMessages(t, resp.Header.Get("Content-Type"), b), "2"), id+": done")
				v.spy.checkSpyArgs(t, id, "lookup_order", wantOrderArgs("a", id))
			}
			continue
		}
		if code, msg := rpcError(t, resp, b, "2"); code != -32602 || !strings.Contains(msg, fmt.Sprintf("Unknown tool: %q", c.body)) {
			t.Errorf("2025 session, Mcp-Name %q, body %q: error %d %q, want -32602 Unknown tool", c.header, c.body, code, msg)
		}
		v.spy.checkSpyNothing(t, id)
	}
}

// leftOut are names a server does not expose, though they name tools
// elsewhere: the tool's original (upstream-prefixed) name, its name
// upstream, its name before the server renamed it, another server's
// exposed names, another case.
var leftOut = map[string][]string{
	"a": {"spy_lookup_order", "lookup_order", "echo", "spy_cancel_order", "cancel_order", "whoami", "ping", "PingME", "ORDER", "Order", "gosdk_test_image_content", "test_simple_text"},
	"b": {"spy_lookup_order", "lookup_order", "cancel_order", "say", "echo", "gosdk_test_simple_text", "Whoami"},
	"c": {"order", "spy_lookup_order", "test_simple_text", "PingME", "say", "whoami", "Ping"},
}

// attackLeftOut calls each server's left-out names on both eras (a 2025
// session, and 2026-07-28 requests with their Mcp-Name header, the shape
// of a direct call): each is an unknown tool and reaches no upstream.
func (v *vservers) attackLeftOut(t *testing.T) {
	n := 0
	for _, name := range vnames {
		legacy := legacySession(t, v.url(name), v.token[name], "2025-11-25")
		for _, tool := range leftOut[name] {
			for _, era := range []string{"2025-11-25", modernProtocol} {
				n++
				id := fmt.Sprintf("LEFT-%d", n)
				params := map[string]any{"name": tool, "arguments": map[string]any{"order_id": id}}
				var resp *http.Response
				var b []byte
				if era == modernProtocol {
					resp, b = postMCP(t, http.DefaultClient, v.url(name), string(modernRequest(2, "tools/call", params)), modernHeaders(v.token[name], "tools/call", tool))
				} else {
					resp, b = postMCP(t, http.DefaultClient, v.url(name), string(legacyRequest(2, "tools/call", params)), legacy)
				}
				code, msg := rpcError(t, resp, b, "2")
				if resp.StatusCode != http.StatusOK || code != -32602 || !strings.Contains(msg, fmt.Sprintf("Unknown tool: %q", tool)) {
					t.Errorf("%s on %s (%s): %d, error %d %q; want 200, -32602 Unknown tool", tool, name, era, resp.StatusCode, code, msg)
				}
				v.spy.checkSpyNothing(t, id)
			}
		}
	}
}

// attackFixed calls server a's "order", whose region and shop are fixed,
// with the fixed arguments set in the ways a decoder might still read
// them, on both eras: named in the arguments in any case, escaped, or in
// a Unicode case fold (Go's encoding/json reads "ſhop" as "shop"), the
// call is refused with -32602 and reaches no upstream; put in _meta (the
// request's, or an "_meta" argument), it does nothing: the upstream
// receives the fixed values, once each.
func (v *vservers) attackFixed(t *testing.T) {
	refused := []struct{ name, args string }{
		{"exact key", `{"order_id":"%s","region":"us"}`},
		{"another case", `{"order_id":"%s","Region":"us"}`},
		{"upper case", `{"order_id":"%s","REGION":"us"}`},
		{"second fixed argument", `{"order_id":"%s","shop":"paris"}`},
		{"Unicode case fold", `{"order_id":"%s","ſhop":"paris"}`},
		{"Unicode case fold, escaped", `{"order_id":"%s","\u017fhop":"paris"}`},
		{"escaped key", `{"order_id":"%s","\u0072egion":"us"}`},
		{"null", `{"order_id":"%s","region":null}`},
		{"twice, the fixed value first", `{"order_id":"%s","region":"eu","region":"us"}`},
		{"after the other arguments", `{"order_id":"%s","verbose":false,"region":"us"}`},
	}
	ineffective := []struct {
		name, args string
		meta       map[string]any
		extra      map[string]any // arguments the spy receives besides the usual
	}{
		{name: "request _meta", args: `{"order_id":"%s"}`, meta: map[string]any{"region": "us", "shop": "paris"}},
		{name: "_meta argument", args: `{"order_id":"%s","_meta":{"region":"us","shop":"paris"}}`,
			extra: map[string]any{"_meta": map[string]any{"region": "us", "shop": "paris"}}},
		{name: "nested", args: `{"order_id":"%s","filter":{"region":"us"}}`, extra: map[string]any{"filter": map[string]any{"region": "us"}}},
	}
	legacy := legacySession(t, v.url("a"), v.token["a"], "2025-11-25")
	call := func(era, id, args string, meta map[string]any) (*http.Response, []byte) {
		params := map[string]any{"name": "order", "arguments": json.RawMessage(fmt.Sprintf(args, id))}
		if meta != nil {
			params["_meta"] = meta
		}
		if era == modernProtocol {
			return postMCP(t, http.DefaultClient, v.url("a"), string(modernRequest(2, "tools/call", params)), modernHeaders(v.token["a"], "tools/call", "order"))
		}
		return postMCP(t, http.DefaultClient, v.url("a"), string(legacyRequest(2, "tools/call", params)), legacy)
	}
	v.attackFixedHeader(t, legacy)
	for _, era := range []string{"2025-11-25", modernProtocol} {
		for i, c := range refused {
			id := fmt.Sprintf("FIX-%s-%d", era, i)
			resp, b := call(era, id, c.args, nil)
			code, msg := rpcError(t, resp, b, "2")
			if code != -32602 || !strings.Contains(msg, "fixed") {
				t.Errorf("%s (%s): error %d %q, want -32602 saying the argument is fixed", c.name, era, code, msg)
			}
			v.spy.checkSpyNothing(t, id)
		}
		for i, c := range ineffective {
			id := fmt.Sprintf("META-%s-%d", era, i)
			resp, b := call(era, id, c.args, c.meta)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s (%s): %d: %s", c.name, era, resp.StatusCode, b)
				continue
			}
			checkToolText(t, rpcResult(t, rpcMessages(t, resp.Header.Get("Content-Type"), b), "2"), id+": done")
			want := wantOrderArgs("a", id)
			for k, x := range c.extra {
				want[k] = x
			}
			v.spy.checkSpyArgs(t, id, "lookup_order", want)
			for _, sc := range v.spy.callsOf(id) {
				for _, k := range []string{"region", "shop"} {
					if _, ok := sc.Meta[k]; ok {
						t.Errorf("%s (%s): the caller's _meta.%s reached the upstream: %v", c.name, era, k, sc.Meta)
					}
				}
			}
		}
	}
}

// attackDefaultCase calls server a's "order", whose verbose argument has
// a default, in both eras: a call that names verbose exactly keeps its
// value, and one that names it in another case is refused with invalid
// params before the upstream, so that the tool gets neither two values
// for it nor none.
func (v *vservers) attackDefaultCase(t *testing.T) {
	legacy := legacySession(t, v.url("a"), v.token["a"], "2025-11-25")
	call := func(era, id, args string) (*http.Response, []byte) {
		params := map[string]any{"name": "order", "arguments": json.RawMessage(fmt.Sprintf(args, id))}
		if era == modernProtocol {
			return postMCP(t, http.DefaultClient, v.url("a"), string(modernRequest(2, "tools/call", params)), modernHeaders(v.token["a"], "tools/call", "order"))
		}
		return postMCP(t, http.DefaultClient, v.url("a"), string(legacyRequest(2, "tools/call", params)), legacy)
	}
	for _, era := range []string{"2025-11-25", modernProtocol} {
		for i, args := range []string{`{"order_id":"%s","Verbose":false}`, `{"order_id":"%s","VERBOSE":false,"verbose":false}`} {
			id := fmt.Sprintf("DEFCASE-%s-%d", era, i)
			resp, b := call(era, id, args)
			if code, msg := rpcError(t, resp, b, "2"); code != -32602 || !strings.Contains(msg, `"verbose"`) {
				t.Errorf("%s (%s): error %d %q, want -32602 naming verbose", fmt.Sprintf(args, id), era, code, msg)
			}
			v.spy.checkSpyNothing(t, id)
		}
		id := fmt.Sprintf("DEFCASE-%s-exact", era)
		resp, b := call(era, id, `{"order_id":"%s","verbose":false}`)
		checkToolText(t, rpcResult(t, rpcMessages(t, resp.Header.Get("Content-Type"), b), "2"), id+": done")
		want := wantOrderArgs("a", id)
		want["verbose"] = false
		v.spy.checkSpyArgs(t, id, "lookup_order", want)
	}
}

// attackOddCalls sends server a tools/calls that are not one request: a
// notification (no id) of a left-out tool and of "order" setting its
// fixed region, on both eras (the SDK's 400: a call needs an id), and
// batches on a 2025-11-25 session (400 with a JSON-RPC error whatever
// tools they name: the revision has no batches). None reaches the
// upstream.
func (v *vservers) attackOddCalls(t *testing.T) {
	legacy := legacySession(t, v.url("a"), v.token["a"], "2025-11-25")
	for i, c := range []struct{ tool, args string }{
		{"spy_lookup_order", `{"order_id":"%s"}`},
		{"order", `{"order_id":"%s","region":"us"}`},
	} {
		for _, era := range []string{"2025-11-25", modernProtocol} {
			id := fmt.Sprintf("NOTE-%s-%d", era, i)
			params := map[string]any{"name": c.tool, "arguments": json.RawMessage(fmt.Sprintf(c.args, id))}
			var resp *http.Response
			var b []byte
			if era == modernProtocol {
				resp, b = postMCP(t, http.DefaultClient, v.url("a"), string(encodeNotification("tools/call", modernParams(params))), modernHeaders(v.token["a"], "tools/call", c.tool))
			} else {
				resp, b = postMCP(t, http.DefaultClient, v.url("a"), string(encodeNotification("tools/call", params)), legacy)
			}
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "missing id") {
				t.Errorf("a notification of %s (%s): %d %s, want the SDK's 400 for a call without an id", c.tool, era, resp.StatusCode, b)
			}
			v.spy.checkSpyNothing(t, id)
		}
	}
	for i, second := range []string{"spy_lookup_order", "order"} {
		ids := []string{fmt.Sprintf("BATCH-%d-1", i), fmt.Sprintf("BATCH-%d-2", i)}
		batch := "[" + string(legacyRequest(2, "tools/call", map[string]any{"name": "order", "arguments": map[string]any{"order_id": ids[0], "region": "us"}})) +
			"," + string(legacyRequest(3, "tools/call", map[string]any{"name": second, "arguments": map[string]any{"order_id": ids[1]}})) + "]"
		resp, b := postMCP(t, http.DefaultClient, v.url("a"), batch, legacy)
		if code, msg := rpcError(t, resp, b, "null"); resp.StatusCode != http.StatusBadRequest || code != -32600 || !strings.Contains(msg, "batches are not supported") {
			t.Errorf("a batch of order and %s: %d, error %d %q, want 400 and -32600: the revision has no batches", second, resp.StatusCode, code, msg)
		}
		for _, id := range ids {
			v.spy.checkSpyNothing(t, id)
		}
	}
}

// encodeNotification is the body of a notification (a request without
// an id), encoded by the SDK's jsonrpc package.
func encodeNotification(method string, params map[string]any) []byte {
	raw, err := json.Marshal(params)
	if err != nil {
		panic(err)
	}
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: method, Params: raw})
	if err != nil {
		panic(err)
	}
	return b
}

// attackFixedHeader calls server a's gosdk_test_x_mcp_header, whose
// region (bound to the Mcp-Param-Region header, SEP-2243) is fixed to
// "eu-west", and which answers with the region it received. Left out,
// the upstream receives the fixed region (Portcullis's upstream client
// writes its header); sent in the Mcp-Param-Region header alone, the
// SDK refuses the header for an argument the body lacks; sent in both,
// the curation refuses it.
func (v *vservers) attackFixedHeader(t *testing.T, legacy http.Header) {
	const tool = "gosdk_test_x_mcp_header"
	call := func(args map[string]any) []byte {
		return modernRequest(2, "tools/call", map[string]any{"name": tool, "arguments": args})
	}
	h := modernHeaders(v.token["a"], "tools/call", tool)

	resp, b := postMCP(t, http.DefaultClient, v.url("a"), string(call(map[string]any{"level": 1})), h)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s without region: %d %s", tool, resp.StatusCode, b)
	}
	checkToolText(t, rpcResult(t, rpcMessages(t, resp.Header.Get("Content-Type"), b), "2"), "region=eu-west")
	resp, b = postMCP(t, http.DefaultClient, v.url("a"), string(legacyRequest(2, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{"level": 1}})), legacy)
	checkToolText(t, rpcResult(t, rpcMessages(t, resp.Header.Get("Content-Type"), b), "2"), "region=eu-west")

	resp, b = postMCP(t, http.DefaultClient, v.url("a"), string(call(map[string]any{"level": 1})), withHeaders(h, "Mcp-Param-Region", "us"))
	if code, msg := rpcError(t, resp, b, "2"); resp.StatusCode != http.StatusBadRequest || code != sdk.CodeHeaderMismatch || !strings.Contains(msg, "Mcp-Param-Region") {
		t.Errorf("%s with Mcp-Param-Region alone: %d, error %d %q; want 400, %d naming the header", tool, resp.StatusCode, code, msg, sdk.CodeHeaderMismatch)
	}
	resp, b = postMCP(t, http.DefaultClient, v.url("a"), string(call(map[string]any{"level": 1, "region": "us"})), withHeaders(h, "Mcp-Param-Region", "us"))
	if code, msg := rpcError(t, resp, b, "2"); code != -32602 || !strings.Contains(msg, "fixed") {
		t.Errorf("%s with region in the body and the header: %d, error %d %q; want -32602 saying it is fixed", tool, resp.StatusCode, code, msg)
	}
}
