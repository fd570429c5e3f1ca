//lint:file-ignore SA1019 the 2026-07-28 revision deprecates MCP logging; the direct hop passes an upstream's log messages on, and is tested with them

package upstream

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// overHTTP, passed to startBackend as the upstream's protocol version,
// serves the backend statelessly over HTTP (2026-07-28): its tools/calls
// take the direct hop (hop.go). Any other version connects the SDK client
// over in-memory transports on that version.
const overHTTP = "http"

// hopEras are the upstreams on 2026-07-28 the features are tested on:
// through the SDK client and through the direct hop.
var hopEras = []string{"2026-07-28", overHTTP}

// seenRequests records the HTTP requests an upstream got.
type seenRequests struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (s *seenRequests) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r.Clone(context.Background()))
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// calls returns the tools/call requests seen.
func (s *seenRequests) calls() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*http.Request
	for _, r := range s.reqs {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			out = append(out, r)
		}
	}
	return out
}

// serveHTTP serves s statelessly, as a 2026-07-28 upstream is, with the
// requests recorded in seen (if not nil) and wrap (if not nil) around.
func serveHTTP(t testing.TB, s *sdk.Server, seen *seenRequests, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	var h http.Handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: true})
	if wrap != nil {
		h = wrap(h)
	}
	if seen != nil {
		h = seen.wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// startBackend starts a Manager with s as upstream "be": over HTTP for
// upVersion overHTTP (then its tools/calls must take the direct hop), else
// over in-memory transports on upVersion.
func startBackend(t *testing.T, f *front, s *sdk.Server, upVersion string) *Manager {
	t.Helper()
	o := Options{Name: "be", Transport: TransportHTTP, URL: "http://unused", Required: true}
	if upVersion == overHTTP {
		o.URL = serveHTTP(t, s, nil, nil).URL
	}
	m, err := New([]Options{o}, f.cat, Deps{Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	if upVersion != overHTTP {
		var dials atomic.Int32
		m.ups[0].conn.dialFn = memDial(t, s, &dials)
		m.ups[0].conn.sessionOpts = &sdk.ClientSessionOptions{ProtocolVersion: upVersion}
	}
	m.Start(context.Background())
	t.Cleanup(func() { within(t, "Manager.Close", func() { m.Close() }) })
	waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
	u := m.ups[0]
	if hop := takesHop(u, "any"); hop != (upVersion == overHTTP) {
		t.Fatalf("upstream over %s: direct hop %v", upVersion, hop)
	}
	return m
}

// takesHop reports whether a call of tool (the upstream's name) on u's
// session takes the direct hop.
func takesHop(u *proxy, tool string) bool {
	_, ok := u.senderFor(u.sup.session(), tool).(*hop)
	return ok
}

// startAt starts a Manager with the http upstream "be" at url for f, and
// waits until it is ready; it is closed when the test ends.
func startAt(t *testing.T, f *front, url string) *Manager {
	t.Helper()
	m, err := New([]Options{{Name: "be", Transport: TransportHTTP, URL: url, Required: true}}, f.cat, Deps{Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	t.Cleanup(func() { within(t, "Manager.Close", func() { m.Close() }) })
	waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
	return m
}

// hopBackend returns an upstream server whose tool "talk" sends two
// progress notifications (to the caller's progress token) and a log
// message before its result, whose tool "bound" binds its argument to a
// header (x-mcp-header), and whose tool "fail" fails with a JSON-RPC error.
func hopBackend() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "hop"}, &sdk.ServerOptions{Capabilities: &sdk.ServerCapabilities{Logging: &sdk.LoggingCapabilities{}}})
	s.AddTool(&sdk.Tool{Name: "talk", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			for i := range 2 {
				_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i + 1), Total: 2})
			}
		}
		_ = req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "warning", Data: "careful"})
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "talked"}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "bound", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
		"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
	}}}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "bound"}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "fail", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no such thing"}
	})
	return s
}

// The direct hop sends the upstream the call as the SDK client would, with
// the upstream's own credentials and never the caller's, and with
// Mcp-Method and Mcp-Name naming the upstream's tool.
func TestHopSendsOnlyWhatTheUpstreamMayHave(t *testing.T) {
	var seen seenRequests
	srv := serveHTTP(t, capsBackend(), &seen, nil)
	key := t.TempDir() + "/key"
	if err := writeFile(key, "upstream-key\n"); err != nil {
		t.Fatal(err)
	}
	f := newFront(t)
	m, err := New([]Options{{Name: "be", Transport: TransportHTTP, URL: srv.URL, Required: true,
		Headers: []NamedValue{{Name: "Authorization", ValueFile: key}}}}, f.cat, Deps{Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	defer within(t, "Manager.Close", func() { m.Close() })
	waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })

	cs := f.caller(t, &sdk.ClientOptions{}, "2026-07-28")
	const callerToken = "Bearer caller-token"
	res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_client", Arguments: map[string]any{},
		Meta: sdk.Meta{"authorization": callerToken, sdk.MetaKeyLogLevel: "info"}})
	if err != nil || res.IsError {
		t.Fatalf("be_client: %v %q", err, text(res))
	}
	if strings.Contains(text(res), "caller-token") || strings.Contains(text(res), `"authorization"`) {
		t.Errorf("the upstream saw the caller's _meta token: %s", text(res))
	}
	calls := seen.calls()
	if len(calls) != 1 {
		t.Fatalf("the upstream got %d tools/call requests, want 1", len(calls))
	}
	r := calls[0]
	if got := r.Header.Values("Authorization"); len(got) != 1 || got[0] != "upstream-key" {
		t.Errorf("Authorization %q, want only the upstream's configured credential", got)
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			if strings.Contains(v, "caller-token") {
				t.Errorf("header %s carries the caller's token", k)
			}
		}
	}
	if got := r.Header.Get("Mcp-Name"); got != "client" {
		t.Errorf("Mcp-Name %q, want the upstream's tool name \"client\"", got)
	}
	if got := r.Header.Get("Mcp-Protocol-Version"); got != "2026-07-28" {
		t.Errorf("Mcp-Protocol-Version %q", got)
	}
}

// Progress and log messages the upstream sends within a call reach the
// caller, in order, under the caller's progress token; a
// JSON-RPC error is the caller's tool error; calls of a tool whose
// arguments go into headers take the SDK client, which writes them.
func TestHopPassesMessagesAndFallsBack(t *testing.T) {
	for _, era := range hopEras {
		for _, callerEra := range []string{"2026-07-28", "2025-11-25"} {
			t.Run("upstream "+era+" caller "+callerEra, func(t *testing.T) { testHopPassesMessages(t, era, callerEra) })
		}
	}
}

func testHopPassesMessages(t *testing.T, era, callerEra string) {
	f := newFront(t)
	m := startBackend(t, f, hopBackend(), era)
	var mu sync.Mutex
	var got []string
	note := func(s string) { mu.Lock(); got = append(got, s); mu.Unlock() }
	cs := f.caller(t, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			note("progress " + req.Params.ProgressToken.(string))
		},
		LoggingMessageHandler: func(_ context.Context, req *sdk.LoggingMessageRequest) {
			note("log " + req.Params.Data.(string))
		},
	}, callerEra)
	params := &sdk.CallToolParams{Name: "be_talk", Arguments: map[string]any{}}
	if callerEra >= statelessEra {
		params.Meta = sdk.Meta{sdk.MetaKeyLogLevel: "info"}
	} else if err := cs.SetLoggingLevel(callCtx(t), &sdk.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	params.SetProgressToken("mine")
	res, err := cs.CallTool(callCtx(t), params)
	if err != nil || text(res) != "talked" {
		t.Fatalf("be_talk: %v %q", err, text(res))
	}
	// The caller's client hands notifications to its handlers on a
	// goroutine of its own, possibly after the result.
	waitFor(t, "the messages", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= 3 })
	mu.Lock()
	want := "progress mine,progress mine,log careful"
	if strings.Join(got, ",") != want {
		t.Errorf("the caller got %q, want %q", got, want)
	}
	mu.Unlock()

	res, err = cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_fail", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "no such thing") {
		t.Errorf("be_fail: %v %q, want an error result with the upstream's message", err, text(res))
	}

	u := m.ups[0]
	if takesHop(u, "bound") {
		t.Error("a tool with header bindings takes the direct hop")
	}
	res, err = cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_bound", Arguments: map[string]any{"region": "eu"}})
	if err != nil || text(res) != "bound" {
		t.Errorf("be_bound: %v %q", err, text(res))
	}
}

// Calls that cannot take the direct hop take the SDK client: an upstream
// of an older era (its session) or one that names a session, and a tool
// whose arguments go into headers, which the SDK client writes
// (Mcp-Param-*).
func TestHopFallsBack(t *testing.T) {
	var seen seenRequests
	srv := serveHTTP(t, hopBackend(), &seen, nil)
	f := newFront(t)
	startAt(t, f, srv.URL)
	res, err := f.session.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_bound", Arguments: map[string]any{"region": "eu"}})
	if err != nil || text(res) != "bound" {
		t.Fatalf("be_bound: %v %q", err, text(res))
	}
	calls := seen.calls()
	if len(calls) != 1 || calls[0].Header.Get("Mcp-Param-Region") != "eu" {
		t.Errorf("the upstream got %d calls, the last without Mcp-Param-Region: eu (the SDK client's)", len(calls))
	}

	f2 := newFront(t)
	m2 := startBackend(t, f2, hopBackend(), "2025-11-25")
	if takesHop(m2.ups[0], "talk") {
		t.Error("a call to an upstream on 2025-11-25 takes the direct hop")
	}

	// A 2026-07-28 server that names a session expects its id back, which
	// only the SDK client sends.
	var withID seenRequests
	srv3 := serveHTTP(t, hopBackend(), &withID, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Mcp-Session-Id", "s-1")
			h.ServeHTTP(w, r)
		})
	})
	f3 := newFront(t)
	m3 := startAt(t, f3, srv3.URL)
	if takesHop(m3.ups[0], "talk") {
		t.Error("a call to an upstream that keeps sessions takes the direct hop")
	}
	res, err = f3.session.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_talk", Arguments: map[string]any{}})
	if err != nil || text(res) != "talked" {
		t.Fatalf("be_talk: %v %q", err, text(res))
	}
	if calls := withID.calls(); len(calls) != 1 || calls[0].Header.Get("Mcp-Session-Id") != "s-1" {
		t.Errorf("the call did not carry the session's id")
	}
}

// An upstream that fails a call at the HTTP level, or ends the answer
// without a response, fails that call only, with an error result: the
// session stays.
func TestHopFailures(t *testing.T) {
	srv := serveHTTP(t, hopBackend(), nil, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.Header.Get("Mcp-Name") {
			case "talk":
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write([]byte(": nothing follows\n\n"))
			case "fail":
				http.Error(w, "down", http.StatusBadGateway)
			default:
				h.ServeHTTP(w, r)
			}
		})
	})
	f := newFront(t)
	m := startAt(t, f, srv.URL)
	u := m.ups[0]
	sess := u.sup.session()
	res, err := f.session.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_talk", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(text(res), `"be"`) {
		t.Errorf("an answer without a response: %v %q, want an error result naming the upstream", err, text(res))
	}
	if u.sup.session() != sess {
		t.Error("the session was replaced after one call's answer ended without a response")
	}
	res, err = f.session.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_fail", Arguments: map[string]any{}})
	if err != nil || !res.IsError {
		t.Errorf("a 502: %v %q, want an error result", err, text(res))
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		t.Errorf("a 502 reached the caller as JSON-RPC error %v", rpcErr)
	}
}

func TestMediaType(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", "application/json", "application/json"},
		{"with parameters", "text/event-stream; charset=utf-8", "text/event-stream"},
		{"upper case and spaces", " Application/JSON ;charset=UTF-8", "application/json"},
		{"empty", "", ""},
	} {
		if got := mediaType(c.in); got != c.want {
			t.Errorf("%s: mediaType(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

// The hop reads an event stream as the SSE format has it: data lines of
// an event joined by newlines, CRLF line ends, comments, event types and
// ids ignored, events of other requests passed over, until the response
// to its request.
func TestHopReadsEventStreams(t *testing.T) {
	h := &hop{n: &relay{logger: slog.New(slog.DiscardHandler)}, logger: slog.New(slog.DiscardHandler)}
	id, _ := jsonrpc.MakeID(float64(7))
	for _, c := range []struct {
		name, stream, want string
	}{
		{"one event", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"x\":1}}\n\n", `{"x":1}`},
		{"CRLF, comments, ids", ": hi\r\nid: 1\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\r\ndata: \"result\":{\"x\":2}}\r\n\r\n", `{"x":2}`},
		{"other events first", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}}\n\ndata:\n\n" +
			"data:{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"x\":3}}\n\n", `{"x":3}`},
		{"no response", "data: {\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}}\n\n", "error"},
		{"not JSON-RPC", "data: nope\n\n", "error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg, err := h.stream(context.Background(), &callTarget{ctx: context.Background()}, strings.NewReader(c.stream), id)
			got := "error"
			if err == nil {
				got = string(msg.Result)
			}
			if got != c.want {
				t.Errorf("got %s (%v), want %s", got, err, c.want)
			}
		})
	}
}
