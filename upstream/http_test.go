package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type traceKey struct{}

// traceTransport stands in for the OpenTelemetry transport: it sends the
// trace id the StartCall hook put in the request's context.
type traceTransport struct{}

func (traceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if id, ok := r.Context().Value(traceKey{}).(string); ok {
		r = r.Clone(r.Context())
		r.Header.Set("Traceparent", id)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// swappable is an http.Handler whose handler a test replaces, as an
// upstream that restarts and forgets its sessions.
type swappable struct{ h atomic.Pointer[http.Handler] }

func (s *swappable) set(h http.Handler)                               { s.h.Store(&h) }
func (s *swappable) ServeHTTP(w http.ResponseWriter, r *http.Request) { (*s.h.Load()).ServeHTTP(w, r) }

func TestHTTPUpstream(t *testing.T) {
	for _, tt := range []struct {
		name      string
		stateless bool
	}{
		{name: "sessions (2025-11-25 era)", stateless: false},
		{name: "stateless", stateless: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var traceparents, authorizations, apiKeys []string
			newHandler := func() http.Handler {
				h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return backend() }, &sdk.StreamableHTTPOptions{Stateless: tt.stateless})
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					if tp := r.Header.Get("Traceparent"); tp != "" {
						traceparents = append(traceparents, tp)
					}
					authorizations = append(authorizations, r.Header.Get("Authorization"))
					apiKeys = append(apiKeys, r.Header.Get("X-Api-Key"))
					mu.Unlock()
					h.ServeHTTP(w, r)
				})
			}
			sw := &swappable{}
			sw.set(newHandler())
			srv := httptest.NewServer(sw)
			defer srv.Close()

			keyFile := t.TempDir() + "/key"
			if err := writeFile(keyFile, "s3cret\n"); err != nil {
				t.Fatal(err)
			}
			f := newFront(t)
			hooks := Hooks{StartCall: func(ctx context.Context, _, _, target string) (context.Context, func(string)) {
				return context.WithValue(ctx, traceKey{}, "trace-"+target), func(string) {}
			}}
			m, err := New([]Options{{Name: "web", Transport: TransportHTTP, URL: srv.URL, Required: true, Deny: []string{"echo"},
				Headers: []NamedValue{{Name: "X-Api-Key", ValueFile: keyFile}}}},
				f.cat, Deps{HTTPClient: &http.Client{Transport: traceTransport{}}, Hooks: hooks, Backoff: fastBackoff})
			if err != nil {
				t.Fatal(err)
			}
			m.Start(context.Background())
			defer within(t, "Manager.Close", func() { m.Close() })
			waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
			if got := text(f.call(t, "web_add", "1")); got != "add:1" {
				t.Fatalf("web_add = %q", got)
			}
			mu.Lock()
			if !containsString(traceparents, "trace-add") {
				t.Errorf("the upstream saw trace headers %v, want trace-add: the call's context must reach the HTTP request", traceparents)
			}
			for i, a := range authorizations {
				if a != "" || apiKeys[i] != "s3cret" {
					t.Errorf("request %d: Authorization %q, X-Api-Key %q; want none and the file's key", i, a, apiKeys[i])
				}
			}
			mu.Unlock()

			// The upstream restarts and forgets its sessions: the next call
			// may fail, and the one after works on a new session.
			sw.set(newHandler())
			ctx := callCtx(t)
			waitFor(t, "calls to work again", func() bool {
				res, err := f.session.CallTool(ctx, &sdk.CallToolParams{Name: "web_add", Arguments: map[string]any{"text": "2"}})
				return err == nil && !res.IsError && text(res) == "add:2"
			})
		})
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}

func writeFile(name, content string) error { return os.WriteFile(name, []byte(content), 0o600) }

func TestHTTPUpstreamOAuthClientCredentials(t *testing.T) {
	var tokenRequests atomic.Int32
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, _ := r.BasicAuth()
		if err := r.ParseForm(); err != nil || id != "portcullis" || secret != "cc-secret" ||
			r.Form.Get("grant_type") != "client_credentials" || r.Form.Get("resource") != "https://tickets.example.com/mcp" || r.Form.Get("scope") != "tickets:read" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		tokenRequests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"access_token":"upstream-token","token_type":"Bearer","expires_in":3600}`))
	}))
	defer idp.Close()
	var mu sync.Mutex
	var auths []string
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return backend() }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer upstream-token" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		// Verified, the token goes no further, as in an auth middleware.
		r.Header.Del("Authorization")
		mcpHandler.ServeHTTP(w, r)
	}))
	defer srv.Close()

	secretFile := t.TempDir() + "/secret"
	if err := writeFile(secretFile, "cc-secret\n"); err != nil {
		t.Fatal(err)
	}
	f := newFront(t)
	m, err := New([]Options{{Name: "tickets", Transport: TransportHTTP, URL: srv.URL, Required: true, Deny: []string{"echo"},
		OAuth: OAuthOptions{TokenURL: idp.URL, ClientID: "portcullis", ClientSecretFile: secretFile, Scopes: []string{"tickets:read"}, Resource: "https://tickets.example.com/mcp"}}},
		f.cat, Deps{Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	defer within(t, "Manager.Close", func() { m.Close() })
	waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
	if got := text(f.call(t, "tickets_add", "1")); got != "add:1" {
		t.Fatalf("tickets_add = %q", got)
	}
	if n := tokenRequests.Load(); n != 1 {
		t.Errorf("token requests = %d, want 1 (the token is cached)", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range auths {
		if a != "Bearer upstream-token" {
			t.Errorf("the upstream got Authorization %q, want Portcullis's own token", a)
		}
	}
}

// TestHTTPUpstreamReusesConnections: calls to an http upstream, one at a
// time and sixteen at a time, go out on kept-alive connections, not on a
// new connection for most calls (the default client's idle pool must hold
// a connection per call in flight, and a call's end must not close the
// connection its response was read on; see drainTransport).
func TestHTTPUpstreamReusesConnections(t *testing.T) {
	var dialled atomic.Int64
	srv := httptest.NewUnstartedServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return backend() }, &sdk.StreamableHTTPOptions{Stateless: true}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	f := newFront(t)
	m, err := New([]Options{{Name: "web", Transport: TransportHTTP, URL: srv.URL, Required: true}}, f.cat, Deps{Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	defer within(t, "Manager.Close", func() { m.Close() })
	waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })

	const conc, each = 16, 50
	before := dialled.Load()
	for i := range each {
		if got := text(f.call(t, "web_add", strconv.Itoa(i))); got != "add:"+strconv.Itoa(i) {
			t.Fatalf("web_add = %q", got)
		}
	}
	if n := dialled.Load() - before; n > 2 {
		t.Errorf("%d calls one at a time dialled %d new connections, want at most 2", each, n)
	}

	before = dialled.Load()
	var wg sync.WaitGroup
	errs := make(chan error, conc*each)
	for range conc {
		wg.Go(func() {
			for i := range each {
				res, err := f.session.CallTool(callCtx(t), &sdk.CallToolParams{Name: "web_add", Arguments: map[string]any{"text": strconv.Itoa(i)}})
				if err != nil || text(res) != "add:"+strconv.Itoa(i) {
					errs <- fmt.Errorf("web_add: %v %v", res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A pool that keeps its connections dials only when none is idle: the
	// connections open at once are at most the calls in flight plus the
	// idle ones it keeps, whatever the timing. A pool that closes them (8
	// idle per host, as before) dials again every few calls.
	if n, most := dialled.Load()-before, int64(conc+idleConnsPerHost); n > most {
		t.Errorf("%d calls, %d at a time, dialled %d new connections, want at most %d (the calls in flight and the idle connections kept)", conc*each, conc, n, most)
	}
}

// An HTTP upstream that closes one call's response stream without an
// answer (and without an event id to resume from) loses that call only:
// the session stays, and so do the other calls in flight on it.
func TestClosedCallStreamKeepsTheSession(t *testing.T) {
	release := make(chan struct{})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server {
		s := sdk.NewServer(&sdk.Implementation{Name: "dropping"}, nil)
		s.AddTool(&sdk.Tool{Name: "drop", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			req.Extra.CloseSSEStream(sdk.CloseSSEStreamArgs{})
			select { // the answer has no stream left to go on
			case <-release:
			case <-ctx.Done():
			}
			return &sdk.CallToolResult{}, nil
		})
		s.AddTool(&sdk.Tool{Name: "block", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "released"}}}, nil
		})
		return s
	}, &sdk.StreamableHTTPOptions{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	f := newFront(t)
	m, err := New([]Options{{Name: "web", Transport: TransportHTTP, URL: srv.URL, Required: true}}, f.cat, Deps{HTTPClient: &http.Client{}, Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	defer within(t, "Manager.Close", func() { m.Close() })
	waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
	u := m.ups[0]
	sess := u.sup.session()

	blocked := callInFlight(t, f.session, "web_block", u)
	other := f.caller(t, &sdk.ClientOptions{}, "2025-11-25")
	res, err := other.CallTool(callCtx(t), &sdk.CallToolParams{Name: "web_drop", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "gave no event id to resume it from") {
		t.Fatalf("web_drop: %v %q, want an error result saying the upstream's stream cannot be resumed", err, text(res))
	}
	close(release)
	if got := <-blocked; got != "released" {
		t.Errorf("the call in flight on the same session ended with %q, want \"released\"", got)
	}
	if u.sup.session() != sess {
		t.Error("the upstream's session was replaced after one call's stream ended")
	}
}

// An HTTP upstream that closes a call's response stream mid-call after
// giving event ids (it keeps an event store, SEP-1699) has the call
// resumed: Portcullis's client reconnects with Last-Event-ID and the
// caller gets the result, on its own stream that stayed open.
func TestClosedCallStreamResumed(t *testing.T) {
	closed := make(chan struct{})   // the tool closed its call's stream
	resumed := make(chan string, 1) // the Last-Event-ID of the first GET that resumes
	stop := make(chan struct{})     // the test is over: the tool returns
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server {
		s := sdk.NewServer(&sdk.Implementation{Name: "polling"}, nil)
		s.AddTool(&sdk.Tool{Name: "reconnect", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			tok := req.Params.GetProgressToken()
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "before closing"})
			req.Extra.CloseSSEStream(sdk.CloseSSEStreamArgs{RetryAfter: time.Millisecond})
			close(closed)
			select { // the rest is sent once the client has come back for it
			case <-resumed:
			case <-stop:
				return nil, errors.New("not resumed")
			}
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: 2, Message: "after reconnecting"})
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "after reconnecting"}}}, nil
		})
		return s
	}, &sdk.StreamableHTTPOptions{EventStore: sdk.NewMemoryEventStore(nil)})
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Last-Event-ID"); r.Method == http.MethodGet && id != "" {
			if gets.Add(1) == 1 {
				<-closed
				resumed <- id
			}
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	f := newFront(t)
	m, err := New([]Options{{Name: "web", Transport: TransportHTTP, URL: srv.URL, Required: true}}, f.cat, Deps{HTTPClient: &http.Client{}, Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	defer within(t, "Manager.Close", func() { m.Close() })
	defer close(stop) // before the session is closed, which waits for the tool
	waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
	u := m.ups[0]
	sess := u.sup.session()

	res, err := f.session.CallTool(callCtx(t), &sdk.CallToolParams{Name: "web_reconnect", Arguments: map[string]any{}, Meta: sdk.Meta{"progressToken": "mine"}})
	if err != nil || res.IsError || text(res) != "after reconnecting" {
		t.Fatalf("web_reconnect: %v %q, want the upstream's result after its stream was resumed", err, text(res))
	}
	// The progress sent on the closed stream and on the resumed one both
	// reach the caller, under its token.
	waitFor(t, "progress from both streams", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		var got []string
		for _, p := range f.prog {
			if p.ProgressToken == "mine" {
				got = append(got, p.Message)
			}
		}
		return slices.Equal(got, []string{"before closing", "after reconnecting"})
	})
	if n := gets.Load(); n != 1 {
		t.Errorf("the client resumed %d times with Last-Event-ID, want once", n)
	}
	if u.sup.session() != sess {
		t.Error("the upstream's session was replaced")
	}
}
