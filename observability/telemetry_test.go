package observability

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// stepClock advances by step on every reading, so that each observed
// duration is exactly one step.
type stepClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

type echoArgs struct {
	Text string `json:"text"`
}

// newServer returns an SDK server with an echo tool, a tool that reports an
// error, and a prompt, behind the telemetry middleware.
func newServer(t *testing.T, o MCPOptions) *sdk.Server {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "v0"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo"}, func(ctx context.Context, _ *sdk.CallToolRequest, in echoArgs) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "broken"}, func(ctx context.Context, _ *sdk.CallToolRequest, _ echoArgs) (*sdk.CallToolResult, any, error) {
		return nil, nil, fmt.Errorf("upstream said no")
	})
	s.AddPrompt(&sdk.Prompt{Name: "greet"}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: "hi"}}}}, nil
	})
	if o.KnownTool == nil {
		o.KnownTool = func(name string) bool { return name == "echo" || name == "broken" }
	}
	s.AddReceivingMiddleware(MCPMiddleware(o))
	return s
}

// connect returns a client session to s over in-memory transports.
func connect(t *testing.T, s *sdk.Server) *sdk.ClientSession {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	ss, err := s.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "client", Version: "v0"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update after checking the change):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestExpositionGolden runs a scripted sequence of successful, failing and
// unknown tool calls, auth decisions and task events, and compares what a scrape shows
// with the golden exposition.
func TestExpositionGolden(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, BuildInfo{Version: "v1.2.3", Revision: "abc123"})
	clock := &stepClock{step: 15 * time.Millisecond}
	cs := connect(t, newServer(t, MCPOptions{Metrics: m, Now: clock.Now}))
	ctx := t.Context()

	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "broken", Arguments: map[string]any{}})
	if err != nil || !res.IsError {
		t.Fatalf("broken tool: %v, %+v", err, res)
	}
	// A flood of made-up names lands in one series.
	for i := range 50 {
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: fmt.Sprintf("no-such-tool-%d", i)}); err == nil {
			t.Fatal("unknown tool: no error")
		}
	}
	if _, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "greet"}); err != nil {
		t.Fatal(err)
	}
	// A virtual server, team-a, exposes the root server's echo_v1 as
	// echo, and nothing else: its calls are counted under its name, with
	// the tool's original name.
	renamed := func(name string) string {
		if name == "echo" {
			return "echo_v1"
		}
		return name
	}
	teamA := connect(t, newServer(t, MCPOptions{
		Metrics: m, Now: clock.Now, Server: "team-a",
		KnownTool: func(name string) bool { return name == "echo" }, OriginalTool: renamed,
	}))
	if _, err := teamA.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}); err != nil {
		t.Fatal(err)
	}
	if res, err := teamA.CallTool(ctx, &sdk.CallToolParams{Name: "broken", Arguments: map[string]any{}}); err != nil || !res.IsError {
		t.Fatalf("broken tool on team-a: %v, %+v", err, res)
	}
	m.AuthEvent("allowed", "")
	m.AuthEvent("allowed", "")
	m.AuthEvent("denied", "expired")
	m.AuthEvent("denied", "missing")
	m.AuthEvent("denied", "missing")
	m.ToolDenied(ToolDenial{Reason: ToolDenialPolicy, Tool: "echo"})
	m.ToolDenied(ToolDenial{Reason: ToolDenialUnknownTool, Tool: Other})
	m.ToolDenied(ToolDenial{Reason: "made-up reason", Tool: Other})
	m.DeclareServer("team-a")
	m.ToolDenied(ToolDenial{Server: "team-a", Reason: ToolDenialStepUp, Tool: "echo", ToolOriginal: "echo_v1"})
	// Tasks: echo runs as a task; one completes after 3 s, one is lost,
	// one is refused at the caller's cap; a made-up tool is _OTHER. On
	// team-a, echo is echo_v1 renamed; a server not configured is _OTHER.
	tm := m.Tasks(TaskMetricsOptions{
		KnownTool: func(_, name string) bool { return name == "echo" },
		OriginalTool: func(server, name string) string {
			if server == "team-a" {
				return renamed(name)
			}
			return name
		},
		Servers:    []string{"team-a"},
		StoreUp:    func() bool { return true },
		OldestLive: func() time.Duration { return 42 * time.Second },
	})
	tm.Declare("", "echo")
	tm.Created("", "echo")
	tm.Live("", "working", 1)
	tm.Live("", "working", -1)
	tm.Finished("", "echo", "completed", 3*time.Second)
	tm.Created("", "echo")
	tm.Live("", "working", 1)
	tm.Created("", "no-such-tool")
	tm.Lost("", "echo")
	tm.Refused("", "echo", TaskRefusedOwnerCap)
	tm.StoreError("get")
	tm.Created("team-a", "echo")
	tm.Live("team-a", "input_required", 1)
	tm.Created("team-b", "echo")

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range families {
		switch mf.GetName() {
		case "mcp_server_operation_duration_seconds", "portcullis_auth_requests_total", "portcullis_build_info", "portcullis_tool_calls_denied_total", "portcullis_mcp_sessions_active",
			"portcullis_tasks_created_total", "portcullis_tasks_refused_total", "portcullis_tasks_live", "portcullis_tasks_finished_total",
			"portcullis_task_duration_seconds", "portcullis_tasks_lost_total", "portcullis_task_store_errors_total",
			"portcullis_task_store_up", "portcullis_task_oldest_live_seconds":
			if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Go's version moves with the toolchain; the rest must not.
	golden(t, "exposition.golden", bytes.ReplaceAll(buf.Bytes(), []byte(runtime.Version()), []byte("GOVERSION")))

	// The client's server/discover, tools/list, echo, broken (tool_error),
	// every unknown name as _OTHER (-32602), prompts/get; team-a's
	// server/discover, echo and broken (_OTHER there, a tool error).
	if n := testutil.CollectAndCount(m.operation); n != 9 {
		t.Errorf("operation series = %d, want 9", n)
	}
}

// TestTracesSpans checks the MCP spans a client's calls produce over HTTP:
// names, kind, attributes, parents and status.
func TestTraceSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := &Tracing{Provider: tp, Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}), Enabled: true}
	s := newServer(t, MCPOptions{
		Tracing:         tr,
		RequestIDHeader: "Test-Request-Id",
		RecordEnduserID: true,
		Identity: func(ti *sdkauth.TokenInfo) (string, string) {
			return "alice", "client-1"
		},
	})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	// What the auth middleware does: hand the SDK the caller's token info.
	withToken := sdkauth.RequireBearerToken(func(context.Context, string, *http.Request) (*sdkauth.TokenInfo, error) {
		return &sdkauth.TokenInfo{UserID: "iss|alice", Expiration: time.Now().Add(time.Hour)}, nil
	}, nil)(h)
	srv := httptest.NewServer(HTTP{Tracing: tr}.MCPRoute("", "/mcp", withToken))
	defer srv.Close()

	const clientTrace = "0af7651916cd43dd8448eb211c80319c"
	headerParent := "00-" + clientTrace + "-b7ad6b7169203331-01"
	metaTrace := "4bf92f3577b34da6a3ce929d0e0e4736"
	metaParent := "00-" + metaTrace + "-00f067aa0ba902b7-01"

	call := func(name string, meta sdk.Meta) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{
			"jsonrpc": "2.0", "id": 7, "method": "tools/call",
			"params": map[string]any{"name": name, "arguments": map[string]any{"text": "x"}, "_meta": meta},
		})
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Traceparent", headerParent)
		req.Header.Set("Test-Request-Id", "7")
		req.Header.Set("Authorization", "Bearer opaque")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("tools/call %s: HTTP %d", name, resp.StatusCode)
		}
	}
	call("echo", nil)
	call("echo", sdk.Meta{"traceparent": metaParent})
	call("broken", nil)
	call("nope", nil)

	var mcpSpans, httpSpans []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.SpanKind == trace.SpanKindServer && strings.HasPrefix(s.Name, "POST ") {
			httpSpans = append(httpSpans, s)
		} else {
			mcpSpans = append(mcpSpans, s)
		}
	}
	if len(httpSpans) != 4 || len(mcpSpans) != 4 {
		t.Fatalf("got %d HTTP and %d MCP spans, want 4 and 4: %v", len(httpSpans), len(mcpSpans), names(exp.GetSpans()))
	}
	for _, s := range httpSpans {
		if s.Name != "POST /mcp" || s.SpanContext.TraceID().String() != clientTrace {
			t.Errorf("HTTP span %q in trace %s, want POST /mcp in the client's trace %s", s.Name, s.SpanContext.TraceID(), clientTrace)
		}
	}

	tests := []struct {
		name      string
		span      tracetest.SpanStub
		wantName  string
		wantTrace string
		parent    *tracetest.SpanStub // nil: parent from _meta
		status    codes.Code
		attrs     map[string]string
	}{
		{"ok, parent from the HTTP span", mcpSpans[0], "tools/call echo", clientTrace, &httpSpans[0], codes.Unset, map[string]string{
			"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "gen_ai.operation.name": "execute_tool",
			"jsonrpc.request.id": "7", "mcp.protocol.version": "2025-11-25", "enduser.id": "alice",
			"network.transport": "tcp",
		}},
		{"parent from _meta.traceparent", mcpSpans[1], "tools/call echo", metaTrace, nil, codes.Unset, map[string]string{
			"gen_ai.tool.name": "echo",
		}},
		{"tool error", mcpSpans[2], "tools/call broken", clientTrace, &httpSpans[2], codes.Error, map[string]string{
			"error.type": "tool_error",
		}},
		{"unknown tool", mcpSpans[3], "tools/call", clientTrace, &httpSpans[3], codes.Error, map[string]string{
			"error.type": "-32602", "gen_ai.tool.name": "nope", "rpc.response.status_code": "-32602",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.span
			if s.Name != tt.wantName || s.SpanKind != trace.SpanKindServer {
				t.Errorf("span %q kind %v, want %q SERVER", s.Name, s.SpanKind, tt.wantName)
			}
			if got := s.SpanContext.TraceID().String(); got != tt.wantTrace {
				t.Errorf("trace %s, want %s", got, tt.wantTrace)
			}
			if tt.parent != nil && s.Parent.SpanID() != tt.parent.SpanContext.SpanID() {
				t.Errorf("parent %s, want the HTTP span %s", s.Parent.SpanID(), tt.parent.SpanContext.SpanID())
			}
			if tt.parent == nil {
				if s.Parent.SpanID().String() != "00f067aa0ba902b7" {
					t.Errorf("parent %s, want the _meta span 00f067aa0ba902b7", s.Parent.SpanID())
				}
				if len(s.Links) != 1 || s.Links[0].SpanContext.TraceID().String() != clientTrace {
					t.Errorf("links %v, want one to the HTTP span", s.Links)
				}
			}
			if s.Status.Code != tt.status {
				t.Errorf("status %v, want %v", s.Status.Code, tt.status)
			}
			got := attrs(s.Attributes)
			for k, v := range tt.attrs {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if _, ok := got["mcp.session.id"]; ok {
				t.Error("a stateless request has mcp.session.id")
			}
			if tt.status == codes.Unset {
				if _, ok := got["error.type"]; ok {
					t.Error("a successful call has error.type")
				}
			}
		})
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func attrs(kvs []attribute.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// TestLegacySessions checks that a legacy session over HTTP is counted while
// open and measured when it closes, and that its requests carry
// mcp.session.id.
func TestLegacySessions(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, BuildInfo{})
	// Set before any session starts, so the goroutine that records a
	// session's end sees it.
	ended := make(chan struct{})
	m.afterSessionEnd = func() { close(ended) }
	exp := tracetest.NewInMemoryExporter()
	tr := &Tracing{Provider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), Propagator: propagation.TraceContext{}}
	s := newServer(t, MCPOptions{Metrics: m, Tracing: tr})
	srv := httptest.NewServer(HTTP{Tracing: tr}.MCPRoute("", "/mcp",
		sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)))
	defer srv.Close()

	client := sdk.NewClient(&sdk.Implementation{Name: "legacy", Version: "v0"}, nil)
	cs, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: srv.URL}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.sessionsActive); got != 1 {
		t.Errorf("sessions active = %v with one open, want 1", got)
	}
	var sessionID string
	var initSpan, callSpan tracetest.SpanStub
	for _, sp := range exp.GetSpans() {
		switch sp.Name {
		case "tools/call echo":
			callSpan = sp
			sessionID = attrs(sp.Attributes)["mcp.session.id"]
		case "initialize":
			initSpan = sp
		}
	}
	// The session's context descends from the initialize request; a later
	// call must still be a child of its own HTTP request's span.
	if callSpan.SpanContext.TraceID() == initSpan.SpanContext.TraceID() {
		t.Errorf("tools/call span is in the initialize request's trace %s", initSpan.SpanContext.TraceID())
	}
	if sessionID == "" || sessionID != cs.ID() {
		t.Errorf("span mcp.session.id = %q, want the session's id %q", sessionID, cs.ID())
	}

	// The session ends on the server when it handles the client's DELETE;
	// its end is recorded on a goroutine of its own.
	cs.Close()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the session's end was not recorded within 10s of closing it")
	}
	// An HTTP span ends when its handler returns, which can be just after
	// the client has read the response; Close waits for every handler.
	srv.Close()
	isHTTPParent := false
	for _, sp := range exp.GetSpans() {
		if sp.Name == "POST /mcp" && sp.SpanContext.SpanID() == callSpan.Parent.SpanID() {
			isHTTPParent = true
		}
	}
	if !isHTTPParent {
		t.Errorf("tools/call span's parent %s is not an HTTP request's span", callSpan.Parent.SpanID())
	}
	if got := testutil.ToFloat64(m.sessionsActive); got != 0 {
		t.Errorf("sessions active = %v after close, want 0", got)
	}
	if n := testutil.CollectAndCount(m.session); n != 1 {
		t.Errorf("session duration series = %d, want 1", n)
	}
	want := `
# HELP portcullis_mcp_sessions_active Legacy (stateful) MCP sessions open now, initialized or not, by MCP server.
# TYPE portcullis_mcp_sessions_active gauge
portcullis_mcp_sessions_active{portcullis_server="root"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "portcullis_mcp_sessions_active"); err != nil {
		t.Error(err)
	}
	if c := sampleCount(t, reg, "mcp_server_session_duration_seconds", "2025-11-25"); c != 1 {
		t.Errorf("sessions measured for 2025-11-25 = %d, want 1", c)
	}
}

// TestUninitializedSessionIsCounted checks that a session counts from its
// initialize, before (and without) the client's initialized notification,
// until it is deleted, and that a stateless initialize is not a session.
func TestUninitializedSessionIsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg, BuildInfo{})
		s := newServer(t, MCPOptions{Metrics: m})
		get := func(*http.Request) *sdk.Server { return s }
		stateful := sdk.NewStreamableHTTPHandler(get, nil)
		stateless := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{Stateless: true})
		serve := func(h http.Handler, method, sessionID string) *httptest.ResponseRecorder {
			t.Helper()
			body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
			if method != http.MethodPost {
				body = ""
			}
			req := httptest.NewRequest(method, "/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if sessionID != "" {
				req.Header.Set("Mcp-Session-Id", sessionID)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code/100 != 2 {
				t.Fatalf("%s: status %d: %s", method, w.Code, w.Body)
			}
			synctest.Wait()
			return w
		}
		serve(stateless, http.MethodPost, "")
		if got := testutil.ToFloat64(m.sessionsActive); got != 0 {
			t.Errorf("sessions active = %v after a stateless initialize, want 0", got)
		}
		id := serve(stateful, http.MethodPost, "").Header().Get("Mcp-Session-Id")
		if got := testutil.ToFloat64(m.sessionsActive); got != 1 {
			t.Errorf("sessions active = %v with one session that sent only initialize, want 1", got)
		}
		serve(stateful, http.MethodDelete, id)
		if got := testutil.ToFloat64(m.sessionsActive); got != 0 {
			t.Errorf("sessions active = %v after DELETE, want 0", got)
		}
	})
}

// TestSessionsActiveByServer: the legacy sessions open on a virtual
// server are counted under its portcullis_server, apart from the root
// server's, whose series exists at zero from the start, as the series of
// each declared server does.
func TestSessionsActiveByServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg, BuildInfo{})
		m.DeclareServer("team-a")
		m.DeclareServer("team-b")
		h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return newServer(t, MCPOptions{Metrics: m, Server: "team-a"}) }, nil)
		serve := func(method, sessionID string) string {
			t.Helper()
			body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
			if method != http.MethodPost {
				body = ""
			}
			req := httptest.NewRequest(method, "/mcp/team-a", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if sessionID != "" {
				req.Header.Set("Mcp-Session-Id", sessionID)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code/100 != 2 {
				t.Fatalf("%s: status %d: %s", method, w.Code, w.Body)
			}
			synctest.Wait()
			return w.Header().Get("Mcp-Session-Id")
		}
		want := func(teamA int) string {
			return fmt.Sprintf(`# HELP portcullis_mcp_sessions_active Legacy (stateful) MCP sessions open now, initialized or not, by MCP server.
# TYPE portcullis_mcp_sessions_active gauge
portcullis_mcp_sessions_active{portcullis_server="root"} 0
portcullis_mcp_sessions_active{portcullis_server="team-a"} %d
portcullis_mcp_sessions_active{portcullis_server="team-b"} 0
`, teamA)
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want(0)), "portcullis_mcp_sessions_active"); err != nil {
			t.Errorf("before any session: %v", err)
		}
		first, second := serve(http.MethodPost, ""), serve(http.MethodPost, "")
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want(2)), "portcullis_mcp_sessions_active"); err != nil {
			t.Errorf("two sessions on team-a: %v", err)
		}
		serve(http.MethodDelete, first)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want(1)), "portcullis_mcp_sessions_active"); err != nil {
			t.Errorf("after one DELETE: %v", err)
		}
		serve(http.MethodDelete, second)
	})
}

func sampleCount(t *testing.T, reg *prometheus.Registry, name, version string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "mcp_protocol_version" && l.GetValue() == version {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// TestAuditLine checks the one line per tool call: who, which tool, the
// outcome and sizes, the trace ids, and never the argument values.
func TestAuditLine(t *testing.T) {
	var logs syncbuf.Buffer
	logger, err := NewLogger(&logs, "info")
	if err != nil {
		t.Fatal(err)
	}
	tr := &Tracing{Provider: sdktrace.NewTracerProvider(), Propagator: propagation.TraceContext{}}
	cs := connect(t, newServer(t, MCPOptions{Logger: logger, Tracing: tr, Now: (&stepClock{step: 2 * time.Millisecond}).Now}))
	const secret = "hunter2-do-not-log"
	if _, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": secret}}); err != nil {
		t.Fatal(err)
	}
	cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "broken", Arguments: map[string]any{"text": secret}})
	cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "missing"})

	if strings.Contains(logs.String(), secret) {
		t.Fatalf("an argument value reached the log:\n%s", logs.String())
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		if m["msg"] == "tool call" {
			lines = append(lines, m)
		}
	}
	want := []struct{ tool, outcome, errType string }{
		{"echo", "ok", ""}, {"broken", "tool_error", "tool_error"}, {"missing", "error", "-32602"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d audit lines, want %d:\n%s", len(lines), len(want), logs.String())
	}
	for i, w := range want {
		l := lines[i]
		if l["audit"] != true || l["tool"] != w.tool || l["outcome"] != w.outcome || (w.errType != "" && l["error_type"] != w.errType) {
			t.Errorf("audit line %d = %v, want tool %s outcome %s error_type %q", i, l, w.tool, w.outcome, w.errType)
		}
		if l["duration_us"] != 2000.0 {
			t.Errorf("duration_us = %v, want 2000", l["duration_us"])
		}
		if id, _ := l["trace_id"].(string); len(id) != 32 {
			t.Errorf("trace_id = %v, want a 32-hex-digit id", l["trace_id"])
		}
	}
	if got := lines[0]["arguments_bytes"]; got != float64(len(`{"text":"`+secret+`"}`)) {
		t.Errorf("arguments_bytes = %v", got)
	}
}

// TestAuditLineOfVirtualServer: a virtual server's audit line names the
// server, and the root name of a tool it exposes under another name.
func TestAuditLineOfVirtualServer(t *testing.T) {
	var logs syncbuf.Buffer
	logger, err := NewLogger(&logs, "info")
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, newServer(t, MCPOptions{Logger: logger, Server: "team-a", OriginalTool: func(name string) string {
		return map[string]string{"echo": "team_echo_root"}[name]
	}}))
	if _, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "tool call" {
			line = m
		}
	}
	if line["server"] != "team-a" || line["tool"] != "echo" || line["tool_original"] != "team_echo_root" {
		t.Errorf("audit line %v, want server team-a, tool echo, tool_original team_echo_root", line)
	}
}

// TestAuditLineCalledAs: the audit line of a call that named its tool by
// another name than the listed one (an MCP App's call by its upstream's
// name) names both.
func TestAuditLineCalledAs(t *testing.T) {
	var logs syncbuf.Buffer
	logger, err := NewLogger(&logs, "info")
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, newServer(t, MCPOptions{Logger: logger, CalledAs: func(ctx context.Context) string { return "say" }}))
	if _, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "tool call" {
			line = m
		}
	}
	if line["tool"] != "echo" || line["tool_called_as"] != "say" {
		t.Errorf("audit line %v, want tool echo, tool_called_as say", line)
	}
}

// TestSharedSessionCounters checks that the hooks of sessions shared
// between replicas count what they are told: sessions rebuilt, events
// replayed (by the number of events) and answers forwarded.
func TestSharedSessionCounters(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, BuildInfo{})
	ctx := context.Background()
	m.SessionRebuilt(ctx)
	m.EventsReplayed(ctx, 3)
	m.EventsReplayed(ctx, 2)
	m.AnswerForwarded(ctx)
	m.AnswerForwarded(ctx)
	want := `
# HELP portcullis_mcp_session_answers_forwarded_total Clients' answers to server-to-client requests of legacy sessions (sampling, elicitation, roots) posted to this replica and handed to the replica whose call waits for them, itself included.
# TYPE portcullis_mcp_session_answers_forwarded_total counter
portcullis_mcp_session_answers_forwarded_total 2
# HELP portcullis_mcp_session_events_replayed_total Events of legacy sessions' streams this replica replayed from the shared event log to a client resuming a stream with Last-Event-ID.
# TYPE portcullis_mcp_session_events_replayed_total counter
portcullis_mcp_session_events_replayed_total 5
# HELP portcullis_mcp_sessions_rebuilt_total Legacy (stateful) MCP sessions this replica rebuilt from the shared session store to serve a request, because another replica made them or its own copy had ended.
# TYPE portcullis_mcp_sessions_rebuilt_total counter
portcullis_mcp_sessions_rebuilt_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"portcullis_mcp_sessions_rebuilt_total", "portcullis_mcp_session_events_replayed_total", "portcullis_mcp_session_answers_forwarded_total"); err != nil {
		t.Error(err)
	}
}
