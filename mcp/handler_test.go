package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
)

// newTestEndpoint serves the core toolset through New's handler.
func newTestEndpoint(t *testing.T, edit func(*Options)) (*httptest.Server, *Handler) {
	return newPolicyEndpoint(t, edit, Deps{})
}

func newPolicyEndpoint(t *testing.T, edit func(*Options), deps Deps) (*httptest.Server, *Handler) {
	return endpoint{edit: edit, deps: deps}.start(t)
}

// handlerFor serves a bare SDK server that a test built, with no policy,
// as New's handler would serve it.
func handlerFor(server *sdk.Server, opts Options) *Handler {
	opts.Defaults()
	deps := Deps{Logger: slog.New(slog.DiscardHandler), LimitHook: func(context.Context, limits.Event) {}}
	return newHandler(server, opts, nil, nil, newSessionCap(opts.MaxSessions, opts.MaxSessionsPerPrincipal, server, nil, deps.LimitHook, deps.Logger), newOpenStreams(), nil, deps)
}

// endpoint says how to build a test /mcp endpoint; the zero value serves
// the core toolset with default options, no policy and no log.
type endpoint struct {
	sets   []string // default: core
	edit   func(*Options)
	deps   Deps // Version, Sealer and Logger are set by handler
	logger *slog.Logger
}

// start serves e through New's handler until the test ends.
func (e endpoint) start(t *testing.T) (*httptest.Server, *Handler) {
	t.Helper()
	h := e.handler(t)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts, h
}

// handler builds e's handler without serving it, for tests that call it
// directly (inside a synctest bubble, where a real listener cannot run).
func (e endpoint) handler(t testing.TB) *Handler {
	t.Helper()
	sets := e.sets
	if sets == nil {
		sets = []string{"core"}
	}
	cat, err := toolsets.New(toolsets.Options{Toolsets: sets}, toolsets.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := NewSealer([][]byte{NewRandomKey()}, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	deps := e.deps
	deps.Version, deps.Sealer, deps.Logger = "test", sealer, e.logger
	var opts Options
	if e.edit != nil {
		e.edit(&opts)
	}
	h := New(cat, opts, deps).Handler()
	h.Start(t.Context())
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
	})
	return h
}

type response struct {
	status  int
	header  http.Header
	body    string
	message map[string]any // the last JSON-RPC message in the body, if any
}

// post sends body to /mcp the way a Streamable HTTP client does and decodes
// the JSON-RPC response whether it comes as JSON or as SSE.
func post(t *testing.T, url, body string, header map[string]string) response {
	t.Helper()
	return do(t, newPost(t, url, body, header))
}

// postTo is post served by h directly, without a listener, for tests in a
// synctest bubble.
func postTo(t *testing.T, h http.Handler, body string, header map[string]string) response {
	t.Helper()
	return serve(h, newPost(t, "http://example.test/mcp", body, header))
}

// newPost builds the request post sends.
func newPost(t *testing.T, url, body string, header map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	return req
}

func do(t *testing.T, req *http.Request) response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return decodeResponse(resp.StatusCode, resp.Header, raw)
}

// serve is do with h answering req directly.
func serve(h http.Handler, req *http.Request) response {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return decodeResponse(w.Code, w.Header(), w.Body.Bytes())
}

// decodeResponse reads the last JSON-RPC message of a response, whether
// it comes as JSON or as SSE.
func decodeResponse(status int, header http.Header, raw []byte) response {
	r := response{status: status, header: header, body: string(raw)}
	if strings.HasPrefix(header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(strings.NewReader(r.body))
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(data), &m) == nil {
					r.message = m
				}
			}
		}
	} else {
		json.Unmarshal(raw, &r.message)
	}
	return r
}

func errorCode(m map[string]any) int {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return int(c)
}

func errorMessage(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["message"].(string)
	return s
}

const (
	legacyInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	modernHdr  = "2026-07-28"
)

func modernCall(name, args string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
}

func TestHandlerRoutesByEra(t *testing.T) {
	ts, _ := newTestEndpoint(t, nil)
	url := ts.URL

	init := post(t, url, legacyInit, nil)
	if init.status != http.StatusOK || init.header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("legacy initialize: status %d, session %q; want 200 with a session id\n%s", init.status, init.header.Get("Mcp-Session-Id"), init.body)
	}
	sid := init.header.Get("Mcp-Session-Id")

	tests := []struct {
		name        string
		body        string
		header      map[string]string
		wantStatus  int
		wantSession bool   // response carries Mcp-Session-Id
		wantText    string // in the body
	}{
		{
			name:       "legacy without session is served statelessly",
			body:       `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"PingME","arguments":{}}}`,
			wantStatus: http.StatusOK, wantText: "BISMILLAH",
		},
		{
			name:   "legacy with its session",
			body:   `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			header: map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"}, wantStatus: http.StatusAccepted,
		},
		{
			name:   "legacy call in its session",
			body:   `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"PingME","arguments":{}}}`,
			header: map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"}, wantStatus: http.StatusOK,
			wantText: "BISMILLAH",
		},
		{
			name:   "unknown session is 404 so the client re-initializes",
			body:   `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`,
			header: map[string]string{"Mcp-Session-Id": "no-such-session", "Mcp-Protocol-Version": "2025-06-18"}, wantStatus: http.StatusNotFound,
		},
		{
			name:   "2026-07-28 by header",
			body:   modernCall("PingME", "{}"),
			header: map[string]string{"Mcp-Protocol-Version": modernHdr, "Mcp-Method": "tools/call", "Mcp-Name": "PingME"}, wantStatus: http.StatusOK,
			wantText: "BISMILLAH",
		},
		{
			name:   "2026-07-28 Mcp-Name that does not match the body",
			body:   modernCall("PingME", "{}"),
			header: map[string]string{"Mcp-Protocol-Version": modernHdr, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}, wantStatus: http.StatusBadRequest,
		},
		{
			name:   "2026-07-28 discover",
			body:   `{"jsonrpc":"2.0","id":8,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`,
			header: map[string]string{"Mcp-Protocol-Version": modernHdr, "Mcp-Method": "server/discover"}, wantStatus: http.StatusOK,
			wantText: "supportedVersions",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := post(t, url, tt.body, tt.header)
			if r.status != tt.wantStatus {
				t.Fatalf("status %d, want %d\n%s", r.status, tt.wantStatus, r.body)
			}
			if got := r.header.Get("Mcp-Session-Id") != ""; got != tt.wantSession {
				t.Errorf("session header present = %v, want %v", got, tt.wantSession)
			}
			if !strings.Contains(r.body, tt.wantText) {
				t.Errorf("body does not contain %q:\n%s", tt.wantText, r.body)
			}
		})
	}
}

func TestHandlerBadInput(t *testing.T) {
	ts, _ := newTestEndpoint(t, func(o *Options) {
		o.MaxBodyBytes = 4096
		o.AllowedOrigins = []string{"https://app.example.com"}
	})
	legacy := map[string]string{"Mcp-Protocol-Version": "2025-06-18"}
	tests := []struct {
		name       string
		body       string
		header     map[string]string
		wantStatus int
		wantCode   int    // JSON-RPC error code, 0 for none
		wantMsg    string // in the error message
		wantTool   string // in the text of an isError tool result
	}{
		{name: "malformed JSON", body: `{"jsonrpc":"2.0","id":1,"method":`, header: legacy, wantStatus: http.StatusBadRequest, wantCode: -32700},
		{name: "not JSON at all", body: `hello`, header: legacy, wantStatus: http.StatusBadRequest, wantCode: -32700},
		{name: "not a request", body: `{"jsonrpc":"2.0","id":1}`, header: legacy, wantStatus: http.StatusBadRequest, wantCode: -32600},
		{name: "not an object", body: `"tools/list"`, header: legacy, wantStatus: http.StatusBadRequest, wantCode: -32600},
		{name: "empty batch", body: `[]`, header: legacy, wantStatus: http.StatusBadRequest, wantCode: -32600},
		{
			name: "nested too deep", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}}`,
			header: legacy, wantStatus: http.StatusBadRequest, wantCode: -32700, wantMsg: "more than 1000 levels deep",
		},
		{name: "wrong jsonrpc version", body: `{"jsonrpc":"1.0","id":1,"method":"ping"}`, header: legacy, wantStatus: http.StatusBadRequest, wantCode: -32600},
		{name: "unknown method", body: `{"jsonrpc":"2.0","id":1,"method":"tools/destroy"}`, header: legacy, wantStatus: http.StatusBadRequest, wantCode: -32601, wantMsg: "tools/destroy"},
		{
			name: "unknown method 2026-07-28", body: `{"jsonrpc":"2.0","id":1,"method":"tools/destroy","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			header: map[string]string{"Mcp-Protocol-Version": modernHdr, "Mcp-Method": "tools/destroy"}, wantStatus: http.StatusNotFound, wantCode: -32601,
		},
		{
			name: "unknown tool names the closest", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ech","arguments":{}}}`,
			header: legacy, wantStatus: http.StatusOK, wantCode: -32602, wantMsg: `Did you mean "echo"?`,
		},
		{
			name: "invalid arguments", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calculator","arguments":{"operation":"pow","a":1,"b":2}}}`,
			// Since 2025-11-25 invalid arguments are a tool error the model
			// can correct, not a protocol error; the SDK validates them.
			header: legacy, wantStatus: http.StatusOK, wantTool: "operation",
		},
		{
			name: "oversized body", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("x", 5000) + `"}}}`,
			header: legacy, wantStatus: http.StatusRequestEntityTooLarge, wantCode: -32600, wantMsg: "exceeds 4096 bytes",
		},
		{
			name: "unlisted origin", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			header: map[string]string{"Origin": "https://evil.example.com"}, wantStatus: http.StatusForbidden,
		},
		{
			name: "listed origin", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			header: map[string]string{"Origin": "https://app.example.com"}, wantStatus: http.StatusOK,
		},
		{
			// allowed_origins names an origin: a loopback page must be
			// listed too (see TestOriginRule).
			name: "unlisted loopback origin on a loopback listener", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			header: map[string]string{"Origin": "http://localhost:6274"}, wantStatus: http.StatusForbidden,
		},
		{
			name: "rebinding host on a loopback listener", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			header: map[string]string{"Host": "evil.example.com"}, wantStatus: http.StatusForbidden,
		},
		{
			name:       "forged requestState",
			body:       `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"requestState":"v1.AAAA","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`,
			header:     map[string]string{"Mcp-Protocol-Version": modernHdr, "Mcp-Method": "tools/call", "Mcp-Name": "echo"},
			wantStatus: http.StatusBadRequest, wantCode: -32602, wantMsg: "Invalid requestState",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := post(t, ts.URL, tt.body, tt.header)
			if r.status != tt.wantStatus {
				t.Fatalf("status %d, want %d\n%s", r.status, tt.wantStatus, r.body)
			}
			if got := errorCode(r.message); got != tt.wantCode {
				t.Fatalf("error code %d, want %d\n%s", got, tt.wantCode, r.body)
			}
			if !strings.Contains(errorMessage(r.message), tt.wantMsg) {
				t.Errorf("error message %q does not contain %q", errorMessage(r.message), tt.wantMsg)
			}
			if tt.wantTool != "" {
				result, _ := r.message["result"].(map[string]any)
				if result["isError"] != true || !strings.Contains(r.body, tt.wantTool) {
					t.Errorf("want an isError result mentioning %q:\n%s", tt.wantTool, r.body)
				}
			}
		})
	}
}

func TestHandlerMethods(t *testing.T) {
	ts, _ := newTestEndpoint(t, nil)
	tests := []struct {
		name       string
		method     string
		header     map[string]string
		wantStatus int
	}{
		{name: "PUT", method: http.MethodPut, wantStatus: http.StatusMethodNotAllowed},
		{name: "GET for 2026-07-28 has no stream", method: http.MethodGet, header: map[string]string{"Mcp-Protocol-Version": modernHdr, "Accept": "text/event-stream"}, wantStatus: http.StatusMethodNotAllowed},
		{name: "GET without session", method: http.MethodGet, header: map[string]string{"Accept": "text/event-stream"}, wantStatus: http.StatusBadRequest},
		{name: "GET unknown session", method: http.MethodGet, header: map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": "nope"}, wantStatus: http.StatusNotFound},
		{name: "DELETE unknown session", method: http.MethodDelete, header: map[string]string{"Mcp-Session-Id": "nope"}, wantStatus: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tt.method, ts.URL, nil)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			if r := do(t, req); r.status != tt.wantStatus {
				t.Fatalf("status %d, want %d\n%s", r.status, tt.wantStatus, r.body)
			}
		})
	}
}

// A tool's plain requestState leaves sealed and comes back opened, bound to
// the request that produced it.
func TestSealStateMiddleware(t *testing.T) {
	sealer, _ := NewSealer([][]byte{NewRandomKey()}, time.Minute, nil)
	server := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	var seen []string
	type in struct {
		N int `json:"n"`
	}
	sdk.AddTool(server, &sdk.Tool{Name: "ask"}, func(ctx context.Context, req *sdk.CallToolRequest, _ in) (*sdk.CallToolResult, any, error) {
		seen = append(seen, req.Params.RequestState)
		if req.Params.RequestState == "step1" {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil, nil
		}
		return &sdk.CallToolResult{
			InputRequests: sdk.InputRequestMap{"q": &sdk.ElicitParams{Message: "ok?", RequestedSchema: &jsonschema.Schema{Type: "object"}}},
			RequestState:  "step1",
		}, nil, nil
	})
	server.AddReceivingMiddleware(sealStateMiddleware(sealer, slog.New(slog.DiscardHandler)))
	ts := httptest.NewServer(handlerFor(server, Options{}))
	defer ts.Close()
	hdr := map[string]string{"Mcp-Protocol-Version": modernHdr, "Mcp-Method": "tools/call", "Mcp-Name": "ask"}
	call := func(args, state string) response {
		extra := ""
		if state != "" {
			extra = `,"requestState":` + strconv.Quote(state) + `,"inputResponses":{"q":{"action":"accept","content":{}}}`
		}
		return post(t, ts.URL, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":`+args+extra+
			`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`, hdr)
	}

	first := call(`{"n":1}`, "")
	result, _ := first.message["result"].(map[string]any)
	state, _ := result["requestState"].(string)
	if !strings.HasPrefix(state, "v1.") || strings.Contains(state, "step1") {
		t.Fatalf("requestState is not sealed: %q\n%s", state, first.body)
	}
	if r := call(`{"n":2}`, state); errorCode(r.message) != -32602 {
		t.Fatalf("state replayed on another request: %s", r.body)
	}
	if r := call(`{"n":1}`, state+"x"); errorCode(r.message) != -32602 {
		t.Fatalf("tampered state accepted: %s", r.body)
	}
	if r := call(`{"n":1}`, state); !strings.Contains(r.body, "done") {
		t.Fatalf("retry with sealed state failed: %s", r.body)
	}
	if want := []string{"", "step1"}; !slices.Equal(seen, want) {
		t.Fatalf("handler saw states %q, want %q (rejected states must not reach it)", seen, want)
	}
}

// TestResponseFormat checks that a 2026-07-28 request that can get nothing
// but its response is answered with a plain JSON body, and that one that
// asked for progress or log messages gets them on an event stream.
func TestResponseFormat(t *testing.T) {
	ts, _ := endpoint{sets: []string{"core", "conformance"}}.start(t)

	call := func(tool, meta string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}` +
			`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}` + meta + `}}}`
	}
	modern := func(tool string) map[string]string {
		return map[string]string{"Mcp-Protocol-Version": modernHdr, "Mcp-Method": "tools/call", "Mcp-Name": tool}
	}
	tests := []struct {
		name        string
		body        string
		header      map[string]string
		wantType    string
		wantText    string // in the result
		wantInBody  string // anywhere in the body, e.g. a notification
		wantMissing string // nowhere in the body
	}{
		{
			name: "a plain call", body: call("PingME", ""), header: modern("PingME"),
			wantType: "application/json", wantText: "BISMILLAH",
		},
		{
			name: "a call that could log but was not asked to", body: call("test_tool_with_logging", ""), header: modern("test_tool_with_logging"),
			wantType: "application/json", wantText: "executed successfully", wantMissing: "notifications/message",
		},
		{
			name: "a call with a progress token", body: call("test_tool_with_progress", `,"progressToken":"tok-1"`), header: modern("test_tool_with_progress"),
			wantType: "text/event-stream", wantText: "tok-1", wantInBody: `"method":"notifications/progress"`,
		},
		{
			name: "a call with a log level", body: call("test_tool_with_logging", `,"io.modelcontextprotocol/logLevel":"info"`), header: modern("test_tool_with_logging"),
			wantType: "text/event-stream", wantText: "executed successfully", wantInBody: "Tool processing data",
		},
		{
			name: "a legacy call without a session", body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"PingME","arguments":{}}}`,
			wantType: "text/event-stream", wantText: "BISMILLAH",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := post(t, ts.URL, tt.body, tt.header)
			if r.status != http.StatusOK {
				t.Fatalf("status %d, want 200\n%s", r.status, r.body)
			}
			if got := r.header.Get("Content-Type"); !strings.HasPrefix(got, tt.wantType) {
				t.Errorf("Content-Type %q, want %s", got, tt.wantType)
			}
			res, _ := r.message["result"].(map[string]any)
			if b, _ := json.Marshal(res["content"]); !strings.Contains(string(b), tt.wantText) {
				t.Errorf("result %v, want one containing %q\n%s", res, tt.wantText, r.body)
			}
			if !strings.Contains(r.body, tt.wantInBody) {
				t.Errorf("body does not contain %q:\n%s", tt.wantInBody, r.body)
			}
			if tt.wantMissing != "" && strings.Contains(r.body, tt.wantMissing) {
				t.Errorf("body contains %q:\n%s", tt.wantMissing, r.body)
			}
		})
	}
}
