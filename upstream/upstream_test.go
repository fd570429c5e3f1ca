package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/curation"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
)

// callTimeout bounds every request a test makes through the proxy: a call
// that hangs fails the test instead of stalling it.
const callTimeout = 30 * time.Second

// callCtx returns a context that ends callTimeout from now, or when the
// test ends.
func callCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// within runs f and fails the test if it does not return within
// callTimeout.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(callTimeout):
		t.Fatalf("%s did not return within %s", what, callTimeout)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type echoIn struct {
	Text string `json:"text"`
}

// backend returns an upstream server with tools echo, add and secret, a
// resource, a resource template and a prompt; its lists come in pages of
// one so that pagination must be followed.
func backend() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "backend"}, &sdk.ServerOptions{
		PageSize:           1,
		SubscribeHandler:   func(context.Context, *sdk.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
		CompletionHandler: func(_ context.Context, req *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
			r := req.Params.Ref
			return &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: []string{r.Type + ":" + r.Name + r.URI + ":" + req.Params.Argument.Value}}}, nil
		},
	})
	for _, name := range []string{"echo", "add", "secret"} {
		sdk.AddTool(s, &sdk.Tool{Name: name}, func(ctx context.Context, req *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "half"})
			}
			if auth := req.Extra; auth != nil && auth.Header.Get("Authorization") != "" {
				return nil, nil, fmt.Errorf("got an Authorization header")
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: name + ":" + in.Text}}}, nil, nil
		})
	}
	sdk.AddTool(s, &sdk.Tool{Name: "meta"}, func(_ context.Context, req *sdk.CallToolRequest, _ echoIn) (*sdk.CallToolResult, any, error) {
		// The SDK's own per-request keys (2026-07-28) are left out.
		keys := slices.DeleteFunc(slices.Sorted(maps.Keys(req.Params.Meta)), func(k string) bool {
			return strings.HasPrefix(k, "io.modelcontextprotocol/")
		})
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("%v %v", keys, req.Params.Meta["traceparent"])}}}, nil, nil
	})
	s.AddResource(&sdk.Resource{URI: "mem://readme", Name: "readme"}, func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: "hello"}}}, nil
	})
	s.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: "mem://items/{id}", Name: "item"}, func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: "item " + strings.TrimPrefix(req.Params.URI, "mem://items/")}}}, nil
	})
	s.AddPrompt(&sdk.Prompt{Name: "greet", Arguments: []*sdk.PromptArgument{{Name: "who"}}}, func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: "hi " + req.Params.Arguments["who"]}}}}, nil
	})
	return s
}

// memDial returns a dialFn that connects to a fresh session of s each time
// and counts the dials.
func memDial(t *testing.T, s *sdk.Server, dials *atomic.Int32) func() (sdk.Transport, func(), error) {
	return func() (sdk.Transport, func(), error) {
		dials.Add(1)
		return pipeConnect(s, nil)
	}
}

// pipeConnect connects a new session of s over an in-memory pipe and
// returns the transport of the pipe's other end. If conns is not nil, it
// maps the session to the server's end of the pipe: closing that end
// breaks the connection as the death of a stdio server does, and the
// session's handlers see their contexts cancelled. stop closes the pipe
// and the session.
func pipeConnect(s *sdk.Server, conns *sync.Map) (sdk.Transport, func(), error) {
	ce, se := net.Pipe()
	ss, err := s.Connect(context.Background(), &sdk.IOTransport{Reader: se, Writer: se}, nil)
	if err != nil {
		ce.Close()
		se.Close()
		return nil, func() {}, err
	}
	if conns != nil {
		conns.Store(ss, se)
	}
	return &sdk.IOTransport{Reader: ce, Writer: ce}, func() {
		se.Close()
		ss.Close()
		if conns != nil {
			conns.Delete(ss)
		}
	}, nil
}

// front is Portcullis's side: a catalog, a server built from it and a
// client session of that server.
type front struct {
	cat     *catalog.Catalog
	server  *sdk.Server
	session *sdk.ClientSession
	changed atomic.Int32
	mu      sync.Mutex
	prog    []*sdk.ProgressNotificationParams
	updated []string
}

func newFront(t testing.TB) *front { return newFrontWith(t, nil) }

// newFrontWith is newFront with prepare called on the catalog before the
// server is built from it.
func newFrontWith(t testing.TB, prepare func(*catalog.Catalog)) *front {
	t.Helper()
	cat, err := toolsets.New(toolsets.Options{}, toolsets.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(cat)
	}
	so := &sdk.ServerOptions{}
	cat.Apply(so)
	f := &front{cat: cat, server: sdk.NewServer(&sdk.Implementation{Name: "portcullis"}, so)}
	cat.Register(f.server)
	ct, st := sdk.NewInMemoryTransports()
	if _, err := f.server.Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "caller"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { f.changed.Add(1) },
		ResourceUpdatedHandler: func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			f.mu.Lock()
			f.updated = append(f.updated, req.Params.URI)
			f.mu.Unlock()
		},
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			f.mu.Lock()
			f.prog = append(f.prog, req.Params)
			f.mu.Unlock()
		},
	})
	if f.session, err = c.Connect(context.Background(), ct, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.session.Close() })
	return f
}

func (f *front) toolNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for tool, err := range f.session.Tools(callCtx(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func (f *front) call(t *testing.T, name, text string) *sdk.CallToolResult {
	t.Helper()
	res, err := f.session.CallTool(callCtx(t), &sdk.CallToolParams{Name: name, Arguments: map[string]any{"text": text}})
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("calling %s: no answer within %s: the proxy or the upstream hangs", name, callTimeout)
	}
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	return res
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// recorder is a Hooks that records what it hears.
type recorder struct {
	mu       sync.Mutex
	calls    []string // "upstream method target kind"
	restarts int
	up       map[string]bool
}

func (r *recorder) hooks() Hooks {
	return Hooks{
		StartCall: func(ctx context.Context, up, method, target string) (context.Context, func(string)) {
			return ctx, func(kind string) {
				r.mu.Lock()
				defer r.mu.Unlock()
				r.calls = append(r.calls, strings.Join([]string{up, method, target, kind}, " "))
			}
		},
		Restarted: func(string) { r.mu.Lock(); r.restarts++; r.mu.Unlock() },
		Up: func(name string, up bool) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.up == nil {
				r.up = map[string]bool{}
			}
			r.up[name] = up
		},
	}
}

func (r *recorder) lastCall() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) == 0 {
		return ""
	}
	return r.calls[len(r.calls)-1]
}

func fastBackoff(int) time.Duration { return time.Millisecond }

func startManager(t *testing.T, cat Catalog, list []Options, dial map[string]func() (sdk.Transport, func(), error), hooks Hooks) *Manager {
	t.Helper()
	m, err := New(list, cat, Deps{Hooks: hooks, Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range m.ups {
		u.conn.dialFn = dial[u.opts.Name]
	}
	m.Start(context.Background())
	t.Cleanup(func() { within(t, "Manager.Close", func() { m.Close() }) })
	return m
}

func ptr[T any](v T) *T { return &v }

func TestAggregation(t *testing.T) {
	before := runtime.NumGoroutine()
	f := newFront(t)
	var dials atomic.Int32
	rec := &recorder{}
	m := startManager(t, f.cat, []Options{{Name: "be", Transport: TransportHTTP, URL: "http://unused", Deny: []string{"secret"}, Required: true}},
		map[string]func() (sdk.Transport, func(), error){"be": memDial(t, backend(), &dials)}, rec.hooks())
	waitFor(t, "the upstream to be ready", func() bool { return m.Ready(context.Background()) == nil })

	if got, want := f.toolNames(t), []string{"be_add", "be_echo", "calculator", "echo", "now"}; !slices.Equal(got, want) {
		// The core toolset's own tools are listed next to the upstream's.
		if !slices.Contains(got, "be_add") || !slices.Contains(got, "be_echo") || slices.Contains(got, "be_secret") {
			t.Fatalf("tools = %v, want be_add and be_echo (pages followed) and no be_secret (denied)", got)
		}
	}
	if !f.cat.HasTool("be_echo") || f.cat.HasTool("be_secret") {
		t.Errorf("HasTool(be_echo) = %v, HasTool(be_secret) = %v; want true, false", f.cat.HasTool("be_echo"), f.cat.HasTool("be_secret"))
	}
	if !slices.Contains(f.cat.ToolNames(), "be_add") {
		t.Errorf("ToolNames() = %v, want be_add in it", f.cat.ToolNames())
	}
	// A view selects the upstream's tools by its name, and their names
	// without the prefix.
	if ps := f.cat.CheckExposure(curation.Exposure{Tools: []curation.ToolSelection{{Source: "be", Name: "add"}}}, nil); len(ps) != 0 {
		t.Errorf("a view of be's add: %v, want no problem", ps)
	}
	if ps := f.cat.CheckExposure(curation.Exposure{Tools: []curation.ToolSelection{{Source: "be", Name: "be_add"}}}, nil); len(ps) != 1 || !ps[0].Warning {
		t.Errorf("a view of be's be_add: %v, want a warning: the prefix is not part of the name", ps)
	}
	if got := text(f.call(t, "be_echo", "x")); got != "echo:x" {
		t.Errorf("be_echo = %q, want echo:x", got)
	}
	if got, want := rec.lastCall(), "be tools/call echo "; got != want {
		t.Errorf("hook saw %q, want %q", got, want)
	}

	rr, err := f.session.ReadResource(callCtx(t), &sdk.ReadResourceParams{URI: "mem://readme"})
	if err != nil || rr.Contents[0].Text != "hello" {
		t.Errorf("read mem://readme = %v, %v; want hello", rr, err)
	}
	rr, err = f.session.ReadResource(callCtx(t), &sdk.ReadResourceParams{URI: "mem://items/7"})
	if err != nil || rr.Contents[0].Text != "item 7" {
		t.Errorf("read mem://items/7 = %v, %v; want item 7", rr, err)
	}
	gp, err := f.session.GetPrompt(callCtx(t), &sdk.GetPromptParams{Name: "be_greet", Arguments: map[string]string{"who": "ann"}})
	if err != nil || gp.Messages[0].Content.(*sdk.TextContent).Text != "hi ann" {
		t.Errorf("prompt be_greet = %v, %v; want hi ann", gp, err)
	}

	// Progress reaches the caller under its own token.
	res, err := f.session.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_add", Arguments: map[string]any{"text": "p"}, Meta: sdk.Meta{"progressToken": "mine"}})
	if err != nil || text(res) != "add:p" {
		t.Fatalf("be_add = %v, %v", res, err)
	}
	waitFor(t, "progress", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.prog) == 1 && f.prog[0].ProgressToken == "mine" && f.prog[0].Message == "half"
	})

	within(t, "Manager.Close", func() { m.Close() })
	if dials.Load() != 1 {
		t.Errorf("dialled %d times, want 1", dials.Load())
	}
	f.session.Close()
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

func TestListChangedReachesCallers(t *testing.T) {
	f := newFront(t)
	be := backend()
	var dials atomic.Int32
	// echo is denied: it would clash with the core toolset's echo.
	m := startManager(t, f.cat, []Options{{Name: "be", Prefix: ptr(""), Transport: TransportHTTP, URL: "http://unused", Required: true, Deny: []string{"echo"}}},
		map[string]func() (sdk.Transport, func(), error){"be": memDial(t, be, &dials)}, Hooks{})
	waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
	if !f.cat.HasTool("add") {
		t.Fatal("an empty prefix should serve add as add")
	}
	seen := f.changed.Load()
	sdk.AddTool(be, &sdk.Tool{Name: "fresh"}, func(context.Context, *sdk.CallToolRequest, echoIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "new"}}}, nil, nil
	})
	waitFor(t, "the new tool in the catalog", func() bool { return f.cat.HasTool("fresh") })
	waitFor(t, "list_changed at the caller", func() bool { return f.changed.Load() > seen })
	if got := text(f.call(t, "fresh", "")); got != "new" {
		t.Errorf("fresh = %q", got)
	}
	be.RemoveTools("fresh")
	waitFor(t, "the removed tool gone", func() bool { return !f.cat.HasTool("fresh") })
}

func TestClashRefused(t *testing.T) {
	f := newFront(t)
	var d1 atomic.Int32
	// "echo" is a built-in tool of the core toolset; with an empty prefix
	// the upstream's echo clashes with it.
	m := startManager(t, f.cat, []Options{{Name: "be", Prefix: ptr(""), Transport: TransportHTTP, URL: "http://unused", Required: true}},
		map[string]func() (sdk.Transport, func(), error){"be": memDial(t, backend(), &d1)}, Hooks{})
	// The upstream connects but is never ready, and nothing of it is served.
	waitFor(t, "the connection", func() bool { return m.ups[0].sup.session() != nil })
	if _, err := f.cat.SetSource("probe", catalog.Set{}); err != nil {
		t.Fatal(err)
	}
	if m.Ready(context.Background()) == nil {
		t.Error("Ready = nil, want an error: the upstream's names clash")
	}
	if f.cat.HasTool("add") {
		t.Error("add is served although the upstream's set was refused")
	}
	_, err := f.cat.SetSource("other", catalog.Set{Tools: []catalog.SetTool{{Tool: &sdk.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}}}})
	if err == nil || !strings.Contains(err.Error(), `tool "echo" is already offered by a built-in tool`) {
		t.Errorf("SetSource clash error = %v", err)
	}
}

// crashy is an upstream server with a tool that breaks its connection
// mid-call, as a crashing process does, one that never answers and one
// that answers.
type crashy struct {
	server *sdk.Server
	// conns maps each session to the server's end of its pipe.
	conns sync.Map
	// hanging receives once each call of hang has started.
	hanging chan struct{}
}

func newCrashy() *crashy {
	c := &crashy{server: sdk.NewServer(&sdk.Implementation{Name: "crashy"}, nil), hanging: make(chan struct{}, 8)}
	sdk.AddTool(c.server, &sdk.Tool{Name: "crash"}, func(ctx context.Context, req *sdk.CallToolRequest, _ echoIn) (*sdk.CallToolResult, any, error) {
		conn, ok := c.conns.Load(req.Session)
		if !ok {
			return nil, nil, fmt.Errorf("crash: no connection known for this session")
		}
		// Closing the server's end of the pipe is what the caller sees
		// of a dead process; it also cancels ctx.
		conn.(io.Closer).Close()
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	sdk.AddTool(c.server, &sdk.Tool{Name: "hang"}, func(ctx context.Context, _ *sdk.CallToolRequest, _ echoIn) (*sdk.CallToolResult, any, error) {
		c.hanging <- struct{}{}
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	sdk.AddTool(c.server, &sdk.Tool{Name: "ok"}, func(context.Context, *sdk.CallToolRequest, echoIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "fine"}}}, nil, nil
	})
	return c
}

// dial is a dialFn that connects to a fresh session of the server each
// time and counts the dials.
func (c *crashy) dial(dials *atomic.Int32) func() (sdk.Transport, func(), error) {
	return func() (sdk.Transport, func(), error) {
		dials.Add(1)
		return pipeConnect(c.server, &c.conns)
	}
}

// waitHanging waits until a call of hang has reached the server.
func (c *crashy) waitHanging(t *testing.T) {
	t.Helper()
	select {
	case <-c.hanging:
	case <-time.After(callTimeout):
		t.Fatalf("the call of hang did not reach the upstream within %s", callTimeout)
	}
}

// hangCall calls cr_hang through f in the background, bounded by ctx, and
// returns where its outcome arrives.
func hangCall(ctx context.Context, f *front) <-chan hangResult {
	out := make(chan hangResult, 1)
	go func() {
		res, err := f.session.CallTool(ctx, &sdk.CallToolParams{Name: "cr_hang", Arguments: map[string]any{"text": ""}})
		out <- hangResult{res, err}
	}()
	return out
}

type hangResult struct {
	res *sdk.CallToolResult
	err error
}

// awaitHang returns the outcome of a hangCall, failing the test if it takes
// longer than bound.
func awaitHang(t *testing.T, out <-chan hangResult, bound time.Duration, what string) hangResult {
	t.Helper()
	select {
	case r := <-out:
		return r
	case <-time.After(bound):
		t.Fatalf("%s: the call of cr_hang did not end within %s", what, bound)
		return hangResult{}
	}
}

// startCrashy starts a manager of one required upstream "cr" served by be,
// counting its connections in dials, and waits until it is ready.
func startCrashy(t *testing.T, f *front, be *crashy, dials *atomic.Int32, hooks Hooks) *Manager {
	t.Helper()
	m := startManager(t, f.cat, []Options{{Name: "cr", Transport: TransportHTTP, URL: "http://unused", Required: true}},
		map[string]func() (sdk.Transport, func(), error){"cr": be.dial(dials)}, hooks)
	waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
	return m
}

const brokenMsg = `upstream: the connection to the MCP server "cr" broke`

func TestCrashMidCall(t *testing.T) {
	f := newFront(t)
	var dials atomic.Int32
	rec := &recorder{}
	be := newCrashy()
	m := startCrashy(t, f, be, &dials, rec.hooks())

	res := f.call(t, "cr_crash", "")
	if !res.IsError || !strings.Contains(text(res), brokenMsg) {
		t.Errorf("cr_crash = %q (IsError %v), want the readable broken-connection error", text(res), res.IsError)
	}
	if got := rec.lastCall(); got != "cr tools/call crash transport" {
		t.Errorf("hook saw %q, want the transport kind", got)
	}
	waitFor(t, "the reconnect", func() bool { return dials.Load() >= 2 && m.Ready(context.Background()) == nil })
	rec.mu.Lock()
	restarts := rec.restarts
	rec.mu.Unlock()
	if restarts < 1 {
		t.Errorf("restarts = %d, want at least 1", restarts)
	}
	if got := text(f.call(t, "cr_ok", "")); got != "fine" {
		t.Errorf("after the reconnect cr_ok = %q, want fine", got)
	}

	// A call that hangs ends when the caller gives up; other calls go on.
	ctx, cancel := context.WithCancel(callCtx(t))
	hung := hangCall(ctx, f)
	be.waitHanging(t)
	if got := text(f.call(t, "cr_ok", "")); got != "fine" {
		t.Errorf("while another call hangs, cr_ok = %q, want fine", got)
	}
	cancel()
	if r := awaitHang(t, hung, callTimeout, "after the caller cancelled"); r.err == nil && !r.res.IsError {
		t.Errorf("cr_hang succeeded after the caller cancelled it")
	}
}

// TestCallsInFlightEndWithTheSession checks that a call waiting on an
// upstream that does not answer ends at once, with the readable error,
// when its session is ended (here because another call found the
// connection broken), rather than when the caller gives up; and that the
// upstream is reconnected meanwhile.
func TestCallsInFlightEndWithTheSession(t *testing.T) {
	f := newFront(t)
	var dials atomic.Int32
	be := newCrashy()
	m := startCrashy(t, f, be, &dials, Hooks{})

	hung := hangCall(callCtx(t), f)
	be.waitHanging(t)
	signal(m.ups[0].sup.broken)
	// Well before the call's own deadline (callTimeout).
	r := awaitHang(t, hung, callTimeout/3, "after its session ended")
	if r.err != nil || !r.res.IsError || !strings.Contains(text(r.res), brokenMsg) {
		t.Errorf("cr_hang = %v, %v; want the readable broken-connection error", r.res, r.err)
	}
	waitFor(t, "the reconnect", func() bool { return dials.Load() >= 2 && m.Ready(context.Background()) == nil })
	if got := text(f.call(t, "cr_ok", "")); got != "fine" {
		t.Errorf("after the reconnect cr_ok = %q, want fine", got)
	}
}

// TestCloseEndsCallsInFlight checks that Manager.Close does not wait for a
// call the upstream never answers, and that the call ends with it.
func TestCloseEndsCallsInFlight(t *testing.T) {
	f := newFront(t)
	var dials atomic.Int32
	be := newCrashy()
	m := startCrashy(t, f, be, &dials, Hooks{})

	hung := hangCall(callCtx(t), f)
	be.waitHanging(t)
	closed := make(chan struct{})
	go func() {
		m.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(callTimeout / 3):
		t.Fatalf("Manager.Close did not return within %s while a call was in flight", callTimeout/3)
	}
	if r := awaitHang(t, hung, callTimeout/3, "after Manager.Close"); r.err != nil || !r.res.IsError {
		t.Errorf("cr_hang = %v, %v; want an error result", r.res, r.err)
	}
}

func TestUnavailableUpstream(t *testing.T) {
	f := newFront(t)
	var dials atomic.Int32
	m := startManager(t, f.cat, []Options{{Name: "down", Transport: TransportHTTP, URL: "http://unused", Required: true}},
		map[string]func() (sdk.Transport, func(), error){"down": func() (sdk.Transport, func(), error) {
			dials.Add(1)
			return nil, func() {}, fmt.Errorf("refused")
		}}, Hooks{})
	waitFor(t, "retries", func() bool { return dials.Load() >= 3 })
	if err := m.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "down") {
		t.Errorf("Ready = %v, want an error naming down", err)
	}
	// The upstream's tool handler answers a readable error while it is down.
	u := m.ups[0]
	res, err := u.callTool("x")(callCtx(t), &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: "down_x"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "is not connected right now") {
		t.Errorf("call while down = %v, %v", res, err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		list []Options
		want []string
	}{
		{name: "ok", list: []Options{
			{Name: "gh", Transport: "stdio", Command: "gh-mcp"},
			{Name: "web", Transport: "http", URL: "https://example.com/mcp"},
		}},
		{name: "everything wrong at once", list: []Options{
			{Name: "bad name", Transport: "ftp"},
			{Name: "a", Transport: "stdio", URL: "http://x", Isolation: "per_tenant"},
			{Name: "a", Transport: "http", URL: "ftp://x", Command: "x", Headers: []NamedValue{{Name: "X", Value: "v", ValueFile: "/f"}}},
			{Name: "c", Prefix: ptr("a"), Transport: "http", URL: "http://x", Allow: []string{"["}, Env: nil},
		}, want: []string{
			`[0].name: "bad name" must be`,
			`[0].transport: "ftp" is not one of stdio, http`,
			`[1].command: required for transport stdio`,
			`[1].isolation: "per_tenant" is not one of shared, per_principal`,
			`[1].transport: stdio takes no url or headers`,
			`[2].name: "a" is also the name of upstreams[1]`,
			`[2].prefix: "a" is also the prefix of upstreams[1]`,
			`[2].url: must be an absolute http or https URL`,
			`[2].transport: http takes no command`,
			`[2].headers[0]: set value or value_file, not both`,
			`[3].prefix: "a" is also the prefix of upstreams[1]`,
			`[3].allow[0]: bad pattern "["`,
		}},
		{name: "oauth incomplete", list: []Options{
			{Name: "o1", Transport: "http", URL: "https://x/mcp", OAuth: OAuthOptions{ClientID: "pc"}},
			{Name: "o2", Transport: "http", URL: "https://x/mcp", OAuth: OAuthOptions{TokenURL: "https://idp/token"}, Headers: []NamedValue{{Name: "Authorization", Value: "Bearer x"}}},
		}, want: []string{
			`[0].oauth.token_url: required when other oauth keys are set`,
			`[1].oauth.client_id: required with oauth.token_url`,
			`[1].oauth.client_secret_file: required with oauth.token_url`,
			`[1].headers[0].name: Authorization comes from oauth`,
		}},
		{name: "token exchange", list: []Options{
			{Name: "x1", Transport: "http", URL: "https://x/mcp", Isolation: "shared", OAuth: OAuthOptions{Grant: "token_exchange", TokenURL: "https://idp/token", ClientID: "pc", ClientSecretFile: "/does/not/exist", RequestedTokenType: "urn:ietf:params:oauth:token-type:id_token"}},
			{Name: "x2", Transport: "http", URL: "https://x/mcp", OAuth: OAuthOptions{Grant: "device_code", TokenURL: "https://idp/token", ClientID: "pc"}},
			{Name: "x3", Transport: "http", URL: "https://x/mcp", MaxProcesses: 3, OAuth: OAuthOptions{TokenURL: "https://idp/token", ClientID: "pc", Audience: "tickets"}},
			{Name: "x4", Transport: "http", URL: "https://x/mcp", OAuth: OAuthOptions{Grant: "token_exchange"}},
		}, want: []string{
			`[0].isolation: shared cannot be used with oauth.grant token_exchange: a shared HTTP session cannot carry each caller's token`,
			`[0].oauth.requested_token_type: "urn:ietf:params:oauth:token-type:id_token" is not one of`,
			`[0].oauth.client_secret_file: reading /does/not/exist`,
			`[1].oauth.grant: "device_code" is not one of client_credentials, token_exchange`,
			`[2].isolation: max_processes and idle_timeout apply only to per_principal`,
			`[2].oauth.grant: audience and requested_token_type apply only to token_exchange`,
			`[3].oauth.token_url: required when other oauth keys are set`,
		}},
		{name: "missing secret file", list: []Options{
			{Name: "s", Transport: "stdio", Command: "x", Env: []NamedValue{{Name: "TOKEN", ValueFile: "/does/not/exist"}}, EnvFiles: []string{"/nope.env"}},
		}, want: []string{`[0].env[0].value_file: reading /does/not/exist`, `[0].env_files[0]: reading /nope.env`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.list)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate = nil, want errors")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("missing %q in:\n%v", w, err)
				}
			}
		})
	}
}

func TestAllowDeny(t *testing.T) {
	o := Options{Allow: []string{"get_*", "search"}, Deny: []string{"get_secret"}}
	for name, want := range map[string]bool{"get_a": true, "search": true, "get_secret": false, "delete": false} {
		if got := o.allowed(name); got != want {
			t.Errorf("allowed(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestSameServerTwice(t *testing.T) {
	f := newFront(t)
	var d1, d2 atomic.Int32
	m := startManager(t, f.cat, []Options{
		{Name: "one", Transport: TransportHTTP, URL: "http://unused", Required: true},
		{Name: "two", Transport: TransportHTTP, URL: "http://unused", Required: true},
	}, map[string]func() (sdk.Transport, func(), error){"one": memDial(t, backend(), &d1), "two": memDial(t, backend(), &d2)}, Hooks{})
	// Tools and prompts are namespaced and both served; the resource URIs
	// are the servers' own, so the second server's copies are left out
	// rather than refusing all it offers.
	waitFor(t, "both ready", func() bool { return m.Ready(context.Background()) == nil })
	for _, name := range []string{"one_echo", "two_echo"} {
		if got := text(f.call(t, name, "x")); got != "echo:x" {
			t.Errorf("%s = %q", name, got)
		}
	}
	res, err := f.session.ListResources(callCtx(t), nil)
	if err != nil || len(res.Resources) != 1 {
		t.Errorf("resources/list = %v, %v; want mem://readme once", res, err)
	}
}

func TestOnlyTraceContextGoesUpstreamInMeta(t *testing.T) {
	f := newFront(t)
	var dials atomic.Int32
	hooks := Hooks{Inject: func(_ context.Context, meta map[string]any) { meta["traceparent"] = "00-trace-span-01" }}
	m := startManager(t, f.cat, []Options{{Name: "be", Transport: TransportHTTP, URL: "http://unused", Required: true}},
		map[string]func() (sdk.Transport, func(), error){"be": memDial(t, backend(), &dials)}, hooks)
	waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
	// The caller's own _meta stays with Portcullis.
	res, err := f.session.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_meta", Arguments: map[string]any{"text": ""}, Meta: sdk.Meta{"secret": "x", "traceparent": "00-caller"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := text(res), "[traceparent] 00-trace-span-01"; got != want {
		t.Errorf("the upstream saw _meta %q, want %q", got, want)
	}
}

func TestDefaultBackoff(t *testing.T) {
	tests := []struct {
		name     string
		attempt  int
		min, max time.Duration
	}{
		{name: "first retry", attempt: 0, min: 200 * time.Millisecond, max: 250 * time.Millisecond},
		{name: "doubles", attempt: 2, min: 800 * time.Millisecond, max: time.Second},
		{name: "capped", attempt: 50, min: 24 * time.Second, max: 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 20 {
				if d := DefaultBackoff(tt.attempt); d < tt.min || d > tt.max {
					t.Fatalf("DefaultBackoff(%d) = %s, want within [%s, %s]", tt.attempt, d, tt.min, tt.max)
				}
			}
		})
	}
}
