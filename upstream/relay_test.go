package upstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

//lint:file-ignore SA1019 the relay is tested with MCP logging and sampling, which the 2026-07-28 revision deprecates and upstreams of earlier revisions still send

// askingBackend returns an upstream server whose tool "ask" asks the client
// for a name (elicitation) and a completion (sampling) and returns both,
// whose tool "log" sends a log message, and whose tool "block" returns
// when release is closed. "ask" returns input requests, which the SDK
// turns into requests on the session for a client of an era before
// 2026-07-28.
func askingBackend(release <-chan struct{}) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "asking"}, nil)
	s.AddTool(&sdk.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if len(req.Params.InputResponses) == 0 {
			return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{
				"name": &sdk.ElicitParams{Message: "Your name?", RequestedSchema: map[string]any{
					"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}},
				}},
				"llm": &sdk.CreateMessageParams{MaxTokens: 5, Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: "hi"}}}},
			}}, nil
		}
		var name, said string
		if r, ok := req.Params.InputResponses["name"].(*sdk.ElicitResult); ok {
			name = fmt.Sprint(r.Action, " ", r.Content["name"])
		}
		if r, ok := req.Params.InputResponses["llm"].(*sdk.CreateMessageWithToolsResult); ok && len(r.Content) == 1 {
			if tc, ok := r.Content[0].(*sdk.TextContent); ok {
				said = tc.Text
			}
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: name + "|" + said}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "elicit", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if len(req.Params.InputResponses) == 0 {
			return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"ok": &sdk.ElicitParams{Message: "Go on?"}}}, nil
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "answered"}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "log", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if err := req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Data: "working"}); err != nil {
			return nil, err
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "logged"}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "block", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "released"}}}, nil
	})
	return s
}

// answering is a caller that answers elicitation and sampling.
func answering(elicited *atomic.Int32) *sdk.ClientOptions {
	return &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			elicited.Add(1)
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		CreateMessageHandler: func(context.Context, *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
			return &sdk.CreateMessageResult{Role: "assistant", Model: "m", Content: &sdk.TextContent{Text: "hello"}}, nil
		},
	}
}

// caller connects another client to the front's server, on protocol
// version (empty: the latest).
func (f *front) caller(t testing.TB, opts *sdk.ClientOptions, version string, mw ...sdk.Middleware) *sdk.ClientSession {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	if _, err := f.server.Connect(callCtx(t), st, nil); err != nil {
		t.Fatal(err)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "caller"}, opts)
	c.AddReceivingMiddleware(mw...)
	cs, err := c.Connect(callCtx(t), ct, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// startAsking starts a Manager with the asking backend as upstream "be",
// its session on protocol version upVersion.
func startAsking(t *testing.T, f *front, upVersion string, release <-chan struct{}) *Manager {
	t.Helper()
	var dials atomic.Int32
	m, err := New([]Options{{Name: "be", Transport: TransportHTTP, URL: "http://unused", Required: true}}, f.cat, Deps{Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	m.ups[0].conn.dialFn = memDial(t, askingBackend(release), &dials)
	m.ups[0].conn.sessionOpts = &sdk.ClientSessionOptions{ProtocolVersion: upVersion}
	m.Start(context.Background())
	t.Cleanup(func() { within(t, "Manager.Close", func() { m.Close() }) })
	waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
	return m
}

var upstreamEras = []string{"2026-07-28", "2025-11-25"}

func TestElicitationAndSamplingReachTheCaller(t *testing.T) {
	for _, era := range upstreamEras {
		t.Run("upstream "+era, func(t *testing.T) {
			f := newFront(t)
			startAsking(t, f, era, nil)
			var elicited atomic.Int32
			cs := f.caller(t, answering(&elicited), "2025-11-25")
			res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_ask", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := text(res), "accept Ada|hello"; res.IsError || got != want {
				t.Errorf("result %q (error %v), want %q", got, res.IsError, want)
			}
			if n := elicited.Load(); n != 1 {
				t.Errorf("the caller was asked %d times, want 1", n)
			}
		})
	}
}

func TestRequestsToStatelessCallersRefused(t *testing.T) {
	// An upstream of an older era sends its requests on its session; a
	// caller on 2026-07-28 cannot be sent them during its call. (A
	// 2026-07-28 upstream's input requests reach it in the result, see
	// TestInputRequiredResultsReachStatelessCallers.)
	for _, era := range []string{"2025-11-25"} {
		t.Run("upstream "+era, func(t *testing.T) {
			f := newFront(t)
			startAsking(t, f, era, nil)
			var elicited atomic.Int32
			cs := f.caller(t, answering(&elicited), "2026-07-28")
			res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_ask", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || !strings.Contains(text(res), "speaks protocol 2026-07-28") {
				t.Errorf("result %q (error %v), want an error that names the caller's protocol", text(res), res.IsError)
			}
			if n := elicited.Load(); n != 0 {
				t.Errorf("the caller was asked %d times, want 0", n)
			}
		})
	}
}

func TestRequestsOfUnknownCallRefused(t *testing.T) {
	// A legacy upstream's request names no call: with two in flight on
	// its session, it belongs to neither.
	f := newFront(t)
	release := make(chan struct{})
	m := startAsking(t, f, "2025-11-25", release)
	var elicited atomic.Int32
	cs := f.caller(t, answering(&elicited), "2025-11-25")
	blocked := callInFlight(t, cs, "be_block", m.ups[0])
	res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_elicit", Arguments: map[string]any{}})
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(res), "several calls are in flight") {
		t.Errorf("result %q (error %v), want an error saying the request is not tied to one call", text(res), res.IsError)
	}
	if n := elicited.Load(); n != 0 {
		t.Errorf("the caller was asked %d times, want 0", n)
	}
	if got := <-blocked; got != "released" {
		t.Errorf("the blocking call ended with %q, want \"released\"", got)
	}
}

// callInFlight starts a call of tool by cs and returns once it is the one
// call in flight on u's session; the channel gets the call's text or
// error when it ends.
func callInFlight(t *testing.T, cs *sdk.ClientSession, tool string, u *proxy) <-chan string {
	t.Helper()
	ended := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: tool, Arguments: map[string]any{}})
		if err != nil {
			ended <- err.Error()
			return
		}
		ended <- text(res)
	}()
	waitFor(t, "the "+tool+" call in flight", func() bool {
		u.relay.inflight.mu.Lock()
		defer u.relay.inflight.mu.Unlock()
		return len(u.relay.inflight.calls[u.sup.session()]) == 1
	})
	return ended
}

func TestLogMessagesReachTheCallerThatAsked(t *testing.T) {
	for _, era := range upstreamEras {
		for _, callerEra := range upstreamEras {
			t.Run("upstream "+era+" caller "+callerEra, func(t *testing.T) {
				f := newFront(t)
				startAsking(t, f, era, nil)
				got := make(chan *sdk.LoggingMessageParams, 4)
				opts := &sdk.ClientOptions{LoggingMessageHandler: func(_ context.Context, req *sdk.LoggingMessageRequest) { got <- req.Params }}
				cs := f.caller(t, opts, callerEra)
				params := &sdk.CallToolParams{Name: "be_log", Arguments: map[string]any{}}
				if callerEra >= statelessEra {
					params.Meta = sdk.Meta{sdk.MetaKeyLogLevel: "info"}
				} else if err := cs.SetLoggingLevel(callCtx(t), &sdk.SetLoggingLevelParams{Level: "info"}); err != nil {
					t.Fatal(err)
				}
				res, err := cs.CallTool(callCtx(t), params)
				if err != nil || res.IsError {
					t.Fatalf("call: %v %q", err, text(res))
				}
				select {
				case p := <-got:
					if p.Level != "info" || p.Data != "working" {
						t.Errorf("log message %+v, want info \"working\"", p)
					}
				case <-callCtx(t).Done():
					t.Fatal("no log message reached the caller")
				}
			})
		}
	}
}

// enumSchema is the requested schema of the conformance suite's SEP-1330
// scenario, with the legacy enumNames.
var enumSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"untitledSingle": map[string]any{"type": "string", "enum": []any{"option1", "option2"}},
		"titledSingle":   map[string]any{"type": "string", "oneOf": []any{map[string]any{"const": "value1", "title": "First"}}},
		"legacyEnum":     map[string]any{"type": "string", "enum": []any{"opt1", "opt2"}, "enumNames": []any{"One", "Two"}},
		"untitledMulti":  map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"type": "string", "enum": []any{"option1", "option2"}}},
		"titledMulti":    map[string]any{"type": "array", "items": map[string]any{"type": "string", "anyOf": []any{map[string]any{"const": "value1", "title": "First"}}}},
	},
}

// On 2026-07-28 the SDK client checks an upstream's elicitation schema
// before Portcullis sees it (and refuses titled multi-selects); on older
// eras the request reaches the caller as the upstream sent it.
func TestElicitationSchemaPassesUnchanged(t *testing.T) {
	for _, era := range []string{"2025-11-25"} {
		t.Run("upstream "+era, func(t *testing.T) {
			f := newFront(t)
			s := sdk.NewServer(&sdk.Implementation{Name: "enums"}, nil)
			s.AddTool(&sdk.Tool{Name: "enums", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				if len(req.Params.InputResponses) == 0 {
					return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"e": &sdk.ElicitParams{Message: "pick", RequestedSchema: enumSchema}}}, nil
				}
				r, _ := req.Params.InputResponses["e"].(*sdk.ElicitResult)
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: r.Action}}}, nil
			})
			var dials atomic.Int32
			m, err := New([]Options{{Name: "be", Transport: TransportHTTP, URL: "http://unused", Required: true}}, f.cat, Deps{Backoff: fastBackoff})
			if err != nil {
				t.Fatal(err)
			}
			m.ups[0].conn.dialFn = memDial(t, s, &dials)
			m.ups[0].conn.sessionOpts = &sdk.ClientSessionOptions{ProtocolVersion: era}
			m.Start(context.Background())
			t.Cleanup(func() { within(t, "Manager.Close", func() { m.Close() }) })
			waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
			// The caller's own SDK client would check the schema as
			// Portcullis's does: it records the request before that.
			var seen any
			record := func(next sdk.MethodHandler) sdk.MethodHandler {
				return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
					if r, ok := req.(*sdk.ElicitRequest); ok {
						seen = r.Params.RequestedSchema
						return &sdk.ElicitResult{Action: "decline"}, nil
					}
					return next(ctx, method, req)
				}
			}
			cs := f.caller(t, &sdk.ClientOptions{ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				return nil, fmt.Errorf("not reached")
			}}, "2025-11-25", record)
			res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_enums", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := text(res), "decline"; res.IsError || got != want {
				t.Errorf("result %q (error %v), want %q", got, res.IsError, want)
			}
			if got, want := fmt.Sprint(seen), fmt.Sprint(enumSchema); got != want {
				t.Errorf("the caller was asked with schema\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestLogTargetAfterTheCall: the SDK client hands a log notification to
// its handler on a goroutine of its own, so a message sent just before a
// call's result can be handled after the call returned. With no call in
// flight it still reaches the caller of the one call that ended within
// lateGrace; with two such calls it is dropped. Requests of the upstream
// go to calls in flight only.
func TestLogTargetAfterTheCall(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	f := inflight{now: func() time.Time { return now }}
	cs := &sdk.ClientSession{}
	a, b, c := &callTarget{}, &callTarget{}, &callTarget{}
	ctx := context.Background()

	f.add(cs, a)()
	if got, err := f.logTarget(ctx, cs); err != nil || got != a {
		t.Errorf("a log message just after a's call: %v, %v; want a", got, err)
	}
	if _, err := f.target(ctx, cs); !errors.Is(err, errNoCaller) {
		t.Errorf("a request just after a's call: %v, want errNoCaller", err)
	}

	doneB := f.add(cs, b)
	if got, err := f.logTarget(ctx, cs); err != nil || got != b {
		t.Errorf("a log message while b runs: %v, %v; want b", got, err)
	}
	if got, err := f.target(ctx, cs); err != nil || got != b {
		t.Errorf("a request while b runs: %v, %v; want b", got, err)
	}
	doneB()
	if got, err := f.logTarget(ctx, cs); !errors.Is(err, errAmbiguousCaller) {
		t.Errorf("a log message just after a's and b's calls: %v, %v; want it dropped, it may be either's", got, err)
	}

	now = now.Add(lateGrace + time.Millisecond)
	f.add(cs, c)()
	if got, err := f.logTarget(ctx, cs); err != nil || got != c {
		t.Errorf("a log message just after c's call, a and b long gone: %v, %v; want c", got, err)
	}
	now = now.Add(lateGrace + time.Millisecond)
	if _, err := f.logTarget(ctx, cs); !errors.Is(err, errNoCaller) {
		t.Errorf("a log message long after every call: %v, want errNoCaller", err)
	}
}

// sessionBackend returns an upstream server whose tool "roots" asks the
// client for its roots on the session and returns the first, and whose
// tool "url" asks for a URL-mode elicitation and, once the client
// answered, says it completed.
func sessionBackend() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "session"}, nil)
	s.AddTool(&sdk.Tool{Name: "roots", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		r, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return nil, err
		}
		if len(r.Roots) == 0 {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "no roots"}}}, nil
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: r.Roots[0].URI}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "url", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		r, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Mode: "url", Message: "Sign in", URL: "https://example.com/login", ElicitationID: "e1"})
		if err != nil {
			return nil, err
		}
		for _, id := range []string{"unknown", "e1"} {
			if err := req.Session.NotifyElicitationComplete(ctx, &sdk.ElicitationCompleteParams{ElicitationID: id}); err != nil {
				return nil, err
			}
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: r.Action}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "needs_url", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return nil, sdk.URLElicitationRequiredError([]*sdk.ElicitParams{{Mode: "url", Message: "Authorize", URL: "https://example.com/authorize", ElicitationID: "e2"}})
	})
	s.AddTool(&sdk.Tool{Name: "complete_e2", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if err := req.Session.NotifyElicitationComplete(ctx, &sdk.ElicitationCompleteParams{ElicitationID: "e2"}); err != nil {
			return nil, err
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "completed"}}}, nil
	})
	return s
}

func startSession(t *testing.T, f *front) {
	t.Helper()
	var dials atomic.Int32
	m, err := New([]Options{{Name: "be", Transport: TransportHTTP, URL: "http://unused", Required: true}}, f.cat, Deps{Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	m.ups[0].conn.dialFn = memDial(t, sessionBackend(), &dials)
	m.ups[0].conn.sessionOpts = &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
	m.Start(context.Background())
	t.Cleanup(func() { within(t, "Manager.Close", func() { m.Close() }) })
	waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
}

func TestRootsRequestsReachTheCaller(t *testing.T) {
	// An upstream of an older era asks for roots on its session: the
	// request goes to the caller of the call, if it offers roots.
	f := newFront(t)
	startSession(t, f)
	var asked atomic.Int32
	cs := rootedCaller(t, f, &asked, "2025-11-25", true)
	res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_roots", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := text(res), "file:///work"; res.IsError || got != want {
		t.Errorf("result %q (error %v), want the caller's root %q", got, res.IsError, want)
	}

	noRoots := f.caller(t, &sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}}, "2025-11-25")
	res, err = noRoots.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_roots", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(res), "does not offer roots") {
		t.Errorf("result %q (error %v), want an error saying the caller offers no roots", text(res), res.IsError)
	}
}

func TestElicitationCompletionReachesTheCaller(t *testing.T) {
	// A URL-mode elicitation's completion goes to the caller the
	// elicitation went to; one naming another id goes nowhere.
	f := newFront(t)
	startSession(t, f)
	completed := make(chan string, 2)
	cs := f.caller(t, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			if req.Params.Mode != "url" || req.Params.ElicitationID != "e1" {
				return nil, fmt.Errorf("elicitation %+v, want URL mode with id e1", req.Params)
			}
			return &sdk.ElicitResult{Action: "accept"}, nil
		},
		ElicitationCompleteHandler: func(_ context.Context, req *sdk.ElicitationCompleteNotificationRequest) {
			completed <- req.Params.ElicitationID
		},
	}, "2025-11-25")
	res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_url", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if text(res) != "accept" || res.IsError {
		t.Fatalf("result %q (error %v), want accept", text(res), res.IsError)
	}
	select {
	case id := <-completed:
		if id != "e1" {
			t.Errorf("the caller was told elicitation %q completed, want e1 only", id)
		}
	case <-callCtx(t).Done():
		t.Fatal("the caller was not told the elicitation completed")
	}

	// An upstream that needs URL-mode elicitations first answers -32042,
	// which reaches the caller as it is; their completion follows.
	_, err = cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_needs_url", Arguments: map[string]any{}})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != sdk.CodeURLElicitationRequired || !strings.Contains(string(rpcErr.Data), `"elicitationId":"e2"`) {
		t.Fatalf("be_needs_url: %v, want -32042 with the upstream's elicitation e2", err)
	}
	if _, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_complete_e2", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-completed:
		if id != "e2" {
			t.Errorf("the caller was told elicitation %q completed, want e2", id)
		}
	case <-callCtx(t).Done():
		t.Fatal("the caller was not told elicitation e2 completed")
	}
}
