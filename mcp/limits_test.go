package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/limits"
)

// limitEvents records limit events.
type limitEvents struct {
	mu  sync.Mutex
	got []limits.Event
}

func (e *limitEvents) hook(_ context.Context, ev limits.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ev)
}

func (e *limitEvents) list() []limits.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]limits.Event(nil), e.got...)
}

// TestToolTimeout runs on a fake clock: a call's timeout passes as soon as
// every goroutine waits, and a call takes exactly its timeout.
func TestToolTimeout(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		// The tool workers end toolWorkerIdle after their last call; the
		// bubble ends once they have, after the stubborn call is released
		// (cleanups run last first).
		t.Cleanup(func() { time.Sleep(toolWorkerIdle) })
		// slow waits for its context, or ignores it (stubborn) until released.
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		cancelled := make(chan error, 4)
		server := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
		type in struct {
			Stubborn bool `json:"stubborn,omitempty"`
		}
		handler := func(ctx context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
			if a.Stubborn {
				<-release
				return nil, nil, nil
			}
			<-ctx.Done()
			cancelled <- ctx.Err()
			return nil, nil, ctx.Err()
		}
		sdk.AddTool(server, &sdk.Tool{Name: "slow"}, handler)
		sdk.AddTool(server, &sdk.Tool{Name: "slower"}, handler)
		sdk.AddTool(server, &sdk.Tool{Name: "quick"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil, nil
		})
		ev := &limitEvents{}
		server.AddReceivingMiddleware(toolTimeoutMiddleware(50*time.Millisecond,
			toolTimeoutMap([]ToolTimeout{{Tool: "slower", Timeout: 150 * time.Millisecond}}), ev.hook, nil))
		cs := connect(t, server)

		tests := []struct {
			name    string
			tool    string
			args    map[string]any
			timeout time.Duration
		}{
			{name: "default timeout, handler honours its context", tool: "slow", timeout: 50 * time.Millisecond},
			{name: "per-tool override", tool: "slower", timeout: 150 * time.Millisecond},
			{name: "handler ignores its context", tool: "slow", args: map[string]any{"stubborn": true}, timeout: 50 * time.Millisecond},
		}
		for _, tc := range tests {
			func() { // t.Run is not allowed in a bubble
				start := time.Now()
				res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: tc.tool, Arguments: tc.args})
				took := time.Since(start)
				if err != nil {
					t.Errorf("%s: CallTool: %v", tc.name, err)
					return
				}
				text := res.Content[0].(*sdk.TextContent).Text
				want := `"` + tc.tool + `" did not finish within ` + tc.timeout.String()
				if !res.IsError || !strings.Contains(text, want) {
					t.Errorf("%s: result %+v %q; want an error result saying %q", tc.name, res, text, want)
					return
				}
				if took < tc.timeout || took > tc.timeout+2*time.Second {
					t.Errorf("%s: call took %v, want about %v", tc.name, took, tc.timeout)
				}
				if tc.args == nil {
					select {
					case err := <-cancelled:
						if err != context.DeadlineExceeded {
							t.Errorf("%s: handler's context ended with %v, want deadline exceeded", tc.name, err)
						}
					case <-time.After(2 * time.Second):
						t.Errorf("%s: handler's context was not cancelled", tc.name)
					}
				}
			}()
		}
		res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "quick"})
		if err != nil || res.IsError {
			t.Fatalf("quick: %v %+v", err, res)
		}
		// A caller that goes away first is not a timeout: the handler's context
		// is cancelled, and nothing is counted.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "slower"}); err == nil {
			t.Fatal("CallTool with a cancelled context: no error")
		}
		select {
		case err := <-cancelled:
			if err != context.Canceled {
				t.Errorf("handler's context ended with %v, want canceled (the caller left)", err)
			}
		case <-time.After(2 * time.Second):
			t.Error("handler's context was not cancelled when the caller left")
		}
		got := ev.list()
		if len(got) != len(tests) {
			t.Fatalf("events %+v, want %d tool_timeout events", got, len(tests))
		}
		for i, e := range got {
			if e.Limit != limits.LimitToolTimeout || e.Tool != tests[i].tool {
				t.Errorf("event %d = %+v, want tool_timeout for %s", i, e, tests[i].tool)
			}
		}
	})
}

func TestBodySizeLimitIsReported(t *testing.T) {
	ev := &limitEvents{}
	ts, _ := newPolicyEndpoint(t, func(o *Options) { o.MaxBodyBytes = 64 }, Deps{LimitHook: ev.hook})
	r := post(t, ts.URL, modernCall("echo", `{"text":"`+strings.Repeat("x", 100)+`"}`), map[string]string{"Mcp-Protocol-Version": modernHdr})
	if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(errorMessage(r.message), "64 bytes") {
		t.Fatalf("status %d, body %s; want 413 naming the limit", r.status, r.body)
	}
	if got := ev.list(); len(got) != 1 || got[0].Limit != limits.LimitBodySize {
		t.Errorf("events %+v, want one body_size event", got)
	}
}

func TestLimitOptionsValidate(t *testing.T) {
	o := Options{
		ToolTimeout: -time.Second,
		MaxSessions: -1,
		ToolTimeouts: []ToolTimeout{
			{Tool: "", Timeout: time.Second},
			{Tool: "a", Timeout: 0},
			{Tool: "a", Timeout: time.Second},
		},
	}
	o.Defaults()
	o.MaxSessionsPerPrincipal = -1
	err := o.Validate()
	for _, want := range []string{
		"tool_timeout: must not be negative", "max_sessions: must not be negative",
		"max_sessions_per_principal: must not be negative",
		"tool_timeouts[0].tool: required", "tool_timeouts[1].timeout: must be positive",
		`tool_timeouts[2].tool: duplicate tool "a"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v\nwant it to mention %q", err, want)
		}
	}
}

// timedOutBody is a request body whose client stopped sending: a read
// fails as it does under limits.BodyDeadline.
type timedOutBody struct{}

func (timedOutBody) Read([]byte) (int, error) { return 0, limits.ErrBodyReadTimeout }
func (timedOutBody) Close() error             { return nil }

// TestBodyReadTimeoutGets408 checks the answer to a body that did not
// arrive in time: 408 with a JSON-RPC error, and the connection closed,
// since the rest of the body may still be on its way.
func TestBodyReadTimeoutGets408(t *testing.T) {
	_, h := newTestEndpoint(t, nil)
	r := httptest.NewRequest(http.MethodPost, "/mcp", timedOutBody{})
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusRequestTimeout || w.Header().Get("Connection") != "close" {
		t.Fatalf("status %d, Connection %q; want 408 and close: %s", w.Code, w.Header().Get("Connection"), w.Body)
	}
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || errorCode(m) != -32000 || !strings.Contains(errorMessage(m), "did not arrive in time") {
		t.Errorf("body %s, want a JSON-RPC error saying the body did not arrive in time", w.Body)
	}
}
