package mcp

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// forwarded is a source's tool "fwd" whose calls may be served directly:
// the direct handler passes on a result with a member no SDK type has
// (x-direct), the SDK server's handler a plain one. Arguments steer both:
// {"ask":true} asks for input (requestState "st") until the retry brings
// it back, {"fail":true} is a -32602 error, {"panic":true} panics.
type forwarded struct {
	direct, viaSDK atomic.Int32
	gotState       atomic.Value // the requestState the last call opened
}

func (f *forwarded) answer(req *sdk.CallToolRequest) (sdk.Result, error) {
	var in struct{ Ask, Fail, Panic bool }
	_ = json.Unmarshal(req.Params.Arguments, &in)
	f.gotState.Store(req.Params.RequestState)
	switch {
	case in.Panic:
		panic("fwd panicked")
	case in.Fail:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "fwd refuses"}
	case in.Ask && req.Params.RequestState != "st":
		return &sdk.CallToolResult{RequestState: "st", InputRequests: sdk.InputRequestMap{
			"q": &sdk.ElicitParams{Message: "?", RequestedSchema: map[string]any{"type": "object"}},
		}}, nil
	}
	return nil, nil
}

func (f *forwarded) set() catalog.Set {
	direct := func(_ context.Context, req *sdk.CallToolRequest) (sdk.Result, error) {
		f.direct.Add(1)
		if res, err := f.answer(req); res != nil || err != nil {
			return res, err
		}
		return &catalog.RawToolResult{JSON: json.RawMessage(`{"content":[{"type":"text","text":"fwd"}],"x-direct":true}`)}, nil
	}
	return catalog.Set{Tools: []catalog.SetTool{{
		Tool: &sdk.Tool{Name: "fwd", InputSchema: json.RawMessage(`{"type":"object"}`)},
		Handler: func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			f.viaSDK.Add(1)
			res, err := f.answer(req)
			if err != nil {
				return nil, err
			}
			if res != nil {
				return res.(*sdk.CallToolResult), nil
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "fwd"}}}, nil
		},
		Direct: direct,
	}, {
		// A tool whose argument is bound to a header, which the SDK server
		// checks: never direct.
		Tool: &sdk.Tool{Name: "bound", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)},
		Handler: func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			f.viaSDK.Add(1)
			return &sdk.CallToolResult{}, nil
		},
		Direct: direct,
	}, {
		// A source's tool without a direct handler.
		Tool: &sdk.Tool{Name: "plain", InputSchema: json.RawMessage(`{"type":"object"}`)},
		Handler: func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			f.viaSDK.Add(1)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "plain"}}}, nil
		},
	}}}
}

// directEndpoint serves /mcp over a catalog with the core toolset and
// the forwarded tool fwd, with sealed request state, on a loopback
// listener (so that the SDK's Host check applies), tool timeouts of 200ms
// for fwd.
func directEndpoint(t *testing.T, f *forwarded) *Handler {
	t.Helper()
	sealer, err := NewSealer([][]byte{fixedKey(3)}, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	return New(forwardedCatalog(t, f), Options{}, Deps{Version: "t", Sealer: sealer}).Handler()
}

// forwardedCatalog is the core toolset and f's tools, from the source "up".
func forwardedCatalog(tb testing.TB, f *forwarded) *catalog.Catalog {
	tb.Helper()
	cat, err := toolsets.New(toolsets.Options{Toolsets: []string{"core"}}, toolsets.Deps{})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := cat.SetSource("up", f.set()); err != nil {
		tb.Fatal(err)
	}
	return cat
}

// directPost posts body with the headers of a 2026-07-28 call of fwd,
// changed by edit, to h as received on a loopback listener.
func directPost(t *testing.T, h http.Handler, body string, edit map[string]string) response {
	t.Helper()
	header := map[string]string{"Mcp-Protocol-Version": modernHdr, "Mcp-Method": "tools/call", "Mcp-Name": "fwd", "Host": "127.0.0.1:8080"}
	for k, v := range edit {
		header[k] = v
	}
	req := newPost(t, "http://127.0.0.1:8080/mcp", body, header)
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}))
	return serve(h, req)
}

// A 2026-07-28 call of a tool with a direct handler is served directly
// only in the shape the SDK would serve the same way; every other request
// goes to the SDK server, which answers it as ever.
func TestDirectCallsTakeOnlyWhatTheSDKWouldServe(t *testing.T) {
	f := &forwarded{}
	h := directEndpoint(t, f)
	call := modernCall("fwd", "{}")
	withMeta := func(extra string) string {
		return strings.Replace(call, `"_meta":{`, `"_meta":{`+extra+`,`, 1)
	}
	tests := []struct {
		name   string
		body   string
		header map[string]string
		direct bool
	}{
		{name: "a plain call", body: call, direct: true},
		{name: "Accept */*", body: call, header: map[string]string{"Accept": "*/*"}, direct: true},
		{name: "Content-Type with charset", body: call, header: map[string]string{"Content-Type": "application/json; charset=utf-8"}, direct: true},
		{name: "a progress token", body: withMeta(`"progressToken":"p"`)},
		{name: "a log level", body: withMeta(`"io.modelcontextprotocol/logLevel":"info"`)},
		{name: "Mcp-Name of another tool", body: call, header: map[string]string{"Mcp-Name": "echo"}},
		{name: "no Mcp-Method", body: call, header: map[string]string{"Mcp-Method": ""}},
		{name: "Accept without event streams", body: call, header: map[string]string{"Accept": "application/json"}},
		{name: "a malformed Content-Type", body: call, header: map[string]string{"Content-Type": "application/json; charset"}},
		{name: "another protocol version", body: call, header: map[string]string{"Mcp-Protocol-Version": "2026-08-01"}},
		{name: "_meta of another version", body: strings.Replace(call, `protocolVersion":"2026-07-28"`, `protocolVersion":"2025-11-25"`, 1)},
		{name: "no client capabilities", body: strings.Replace(call, `,"io.modelcontextprotocol/clientCapabilities":{}`, ``, 1)},
		{name: "an invalid client info", body: strings.Replace(call, `{"name":"t","version":"1"}`, `7`, 1)},
		{name: "a session id", body: call, header: map[string]string{"Mcp-Session-Id": "s"}},
		{name: "a batch", body: "[" + call + "]"},
		{name: "a notification", body: strings.Replace(call, `"id":7,`, ``, 1)},
		{name: "a foreign Host on a loopback listener", body: call, header: map[string]string{"Host": "evil.example"}},
		{name: "an upper-case Host", body: call, header: map[string]string{"Host": "LOCALHOST:8080"}},
		{name: "a tool without a direct handler", body: modernCall("echo", `{"text":"x"}`), header: map[string]string{"Mcp-Name": "echo"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.direct.Load()
			r := directPost(t, h, tt.body, tt.header)
			if got := f.direct.Load() > before; got != tt.direct {
				t.Fatalf("served directly: %v, want %v (status %d, %s)", got, tt.direct, r.status, r.body)
			}
			if tt.direct {
				res, _ := r.message["result"].(map[string]any)
				meta, _ := res["_meta"].(map[string]any)
				info, _ := meta[sdk.MetaKeyServerInfo].(map[string]any)
				if r.status != http.StatusOK || res["x-direct"] != true || res["resultType"] != "complete" || info["name"] != "portcullis" {
					t.Errorf("status %d, result %v: want the result as passed on, complete, naming portcullis", r.status, res)
				}
			}
		})
	}

	t.Run("a tool run as a Portcullis task", func(t *testing.T) {
		g := &forwarded{}
		cat := forwardedCatalog(t, g)
		cat.SetTaskSupport("fwd", tasks.ToolTasks{Support: tasks.SupportOptional})
		directPost(t, New(cat, Options{}, Deps{Version: "t"}).Handler(), call, nil)
		if g.direct.Load() != 0 || g.viaSDK.Load() != 1 {
			t.Errorf("direct %d, SDK %d: want the SDK server's handler", g.direct.Load(), g.viaSDK.Load())
		}
	})
	t.Run("a tool that binds an argument to a header", func(t *testing.T) {
		before := f.direct.Load()
		// The SDK server refuses the missing Mcp-Param-Region header.
		r := directPost(t, h, modernCall("bound", `{"region":"eu"}`), map[string]string{"Mcp-Name": "bound"})
		if f.direct.Load() != before || r.status != http.StatusBadRequest {
			t.Errorf("served directly: %v, status %d %s: want the SDK server's refusal", f.direct.Load() != before, r.status, r.body)
		}
	})
	t.Run("a source's tool without a direct handler", func(t *testing.T) {
		before, sdkBefore := f.direct.Load(), f.viaSDK.Load()
		r := directPost(t, h, modernCall("plain", "{}"), map[string]string{"Mcp-Name": "plain"})
		if f.direct.Load() != before || f.viaSDK.Load() != sdkBefore+1 || r.status != http.StatusOK {
			t.Errorf("direct %d→%d, SDK %d→%d, status %d: want the SDK server's handler", before, f.direct.Load(), sdkBefore, f.viaSDK.Load(), r.status)
		}
	})
}

// A direct call runs the server's middleware: requestState is sealed and
// opened, errors get the status and code the SDK would send, a panic is
// an error result.
func TestDirectCallsRunTheMiddleware(t *testing.T) {
	f := &forwarded{}
	h := directEndpoint(t, f)

	r := directPost(t, h, modernCall("fwd", `{"ask":true}`), nil)
	res, _ := r.message["result"].(map[string]any)
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || res["inputRequests"] == nil || state == "" || state == "st" {
		t.Fatalf("ask: %d %v, want input_required with a sealed state", r.status, r.message)
	}
	retry := strings.Replace(modernCall("fwd", `{"ask":true}`), `"arguments":`, `"requestState":"`+state+`","inputResponses":{"q":{"action":"decline"}},"arguments":`, 1)
	r = directPost(t, h, retry, nil)
	if res, _ := r.message["result"].(map[string]any); res["x-direct"] != true || f.gotState.Load() != "st" {
		t.Errorf("retry: %v, the handler opened %q: want the result, after the state the handler gave", r.message, f.gotState.Load())
	}
	tampered := strings.Replace(retry, state, state[:len(state)-3]+"AAA", 1)
	if r = directPost(t, h, tampered, nil); r.status != http.StatusBadRequest || errorCode(r.message) != jsonrpc.CodeInvalidParams {
		t.Errorf("tampered state: %d %v, want 400 -32602", r.status, r.message)
	}

	if r = directPost(t, h, modernCall("fwd", `{"fail":true}`), nil); r.status != http.StatusBadRequest || errorMessage(r.message) != "fwd refuses" {
		t.Errorf("a -32602 error: %d %v, want 400 with the handler's error", r.status, r.message)
	}
	r = directPost(t, h, modernCall("fwd", `{"panic":true}`), nil)
	if res, _ := r.message["result"].(map[string]any); r.status != http.StatusOK || res["isError"] != true {
		t.Errorf("a panic: %d %v, want an error result", r.status, r.message)
	}
	if f.viaSDK.Load() != 0 {
		t.Errorf("%d calls took the SDK server", f.viaSDK.Load())
	}
}
