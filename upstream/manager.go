package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/outbound"
)

// Kinds of failure that [Hooks.StartCall]'s done function receives. An
// empty kind is a success.
const (
	// KindUnavailable: the upstream was not connected when the call came.
	KindUnavailable = "unavailable"
	// KindTransport: the connection broke during the call (the process
	// crashed, the HTTP upstream went away, it sent garbage).
	KindTransport = "transport"
	// KindTimeout: the call's deadline passed.
	KindTimeout = "timeout"
	// KindCanceled: the caller cancelled the call.
	KindCanceled = "canceled"
	// KindProtocol: the upstream answered with a JSON-RPC error.
	KindProtocol = "protocol"
	// KindToolError: the upstream's tool returned an error result.
	KindToolError = "tool_error"
)

// Hooks receive what the upstreams do, for metrics and traces. Every field
// may be nil. They must be fast and must not block.
type Hooks struct {
	// StartCall is called as a request to an upstream starts (method
	// tools/call, resources/read or prompts/get; target is the upstream's
	// own tool or prompt name, or the URI). The request is sent with the
	// returned context, so a span started here is the parent of the HTTP
	// upstream's span. done receives the outcome: "" or a Kind… constant.
	StartCall func(ctx context.Context, upstream, method, target string) (context.Context, func(kind string))
	// Inject adds the trace context of ctx (the one StartCall returned) to
	// a request's params._meta, as the MCP semantic conventions carry it,
	// for upstreams that read it from there (stdio ones above all). Nothing
	// else of the caller's _meta is sent upstream.
	Inject func(ctx context.Context, meta map[string]any)
	// Restarted is called each time an upstream is reconnected (a stdio
	// server restarted) after it failed or exited.
	Restarted func(upstream string)
	// Up is called when an upstream becomes connected or stops being so.
	Up func(upstream string, up bool)
}

// idleConnsPerHost is how many idle connections to one http upstream
// DefaultHTTPClient keeps: more than [outbound.IdleConnsPerHost], for the
// calls in flight of a busy gateway to one upstream.
const idleConnsPerHost = 128

// DefaultHTTPClient returns the client http upstreams are called with
// unless [Deps] names another: the module's outbound transport (dial, TLS
// and header timeouts, proxy, HTTP/2) with no response-header or overall
// timeout, which would cut off SSE streams
// and slow calls (each call's context bounds it instead; a 2026-07-28
// upstream sends a slow call's headers only with its result), and with
// idleConnsPerHost idle connections per upstream.
func DefaultHTTPClient() *http.Client {
	c := &http.Client{Transport: outbound.Transport()}
	if t, ok := c.Transport.(*http.Transport); ok {
		t.ResponseHeaderTimeout = 0
		t.MaxIdleConnsPerHost = idleConnsPerHost
	}
	return c
}

// Deps are what the upstreams need from the process. Every field may be nil.
type Deps struct {
	// Logger receives the upstreams' lifecycle and the stdio servers'
	// stderr, line by line. Nil discards.
	Logger *slog.Logger
	// HTTPClient carries requests to http upstreams. Wrap its transport to
	// trace them. Nil means [DefaultHTTPClient].
	HTTPClient *http.Client
	// Hooks receive telemetry.
	Hooks Hooks
	// Backoff is how long to wait before reconnecting after the attempt-th
	// consecutive failure (0-based). Nil means exponential from 250ms to
	// 30s, with jitter.
	Backoff func(attempt int) time.Duration
	// Version is the client version Portcullis reports to upstreams.
	Version string
	// PrincipalKey names the caller a per_principal upstream runs a
	// process for, from its token info. Nil means the token's UserID.
	PrincipalKey func(*sdkauth.TokenInfo) string
	// Principal is the caller's verified identity, from its token info,
	// that pass_principal gives stdio servers. Nil means the token's
	// UserID as subject and its scopes.
	Principal func(*sdkauth.TokenInfo) (Principal, bool)
	// SubjectToken is the caller's raw bearer token, from its token info,
	// which an http upstream with oauth.grant token_exchange exchanges for
	// a token of its own audience; nothing else reads it, and it is never
	// logged or sent upstream. Nil means no caller has one, and such
	// upstreams refuse every call.
	SubjectToken func(*sdkauth.TokenInfo) (string, bool)
}

// DefaultBackoff doubles from 250ms per attempt up to 30s, with up to 20%
// jitter so that upstreams that fail together do not retry together.
func DefaultBackoff(attempt int) time.Duration {
	d := 250 * time.Millisecond << min(attempt, 7)
	d = min(d, 30*time.Second)
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

// healthyRun is how long a connection must last for the next failure to
// count as the first again.
const healthyRun = 30 * time.Second

// Manager runs the upstream MCP servers of the configuration and keeps
// what they offer in a [catalog.Catalog]: build it with [New], start it with
// [Manager.Start], stop it with [Manager.Close].
type Manager struct {
	ups  []*upstream
	deps Deps

	wg     sync.WaitGroup
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
}

// Catalog is where a Manager puts what upstreams offer; *catalog.Catalog is one.
type Catalog interface {
	SetSource(name string, set catalog.Set) (skipped []string, err error)
	RemoveSource(name string)
	ResourceUpdated(ctx context.Context, uri string)
}

// New returns a Manager for the upstreams of list, which put what they
// offer into cat. list should have passed [Validate]; New checks it again
// and reads the files it names.
func New(list []Options, cat Catalog, deps Deps) (*Manager, error) {
	if err := Validate(list); err != nil {
		return nil, fmt.Errorf("upstream: upstreams%w", err)
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.HTTPClient == nil {
		deps.HTTPClient = DefaultHTTPClient()
	}
	if deps.Backoff == nil {
		deps.Backoff = DefaultBackoff
	}
	if deps.Version == "" {
		deps.Version = "dev"
	}
	m := &Manager{deps: deps}
	// Servers built from the catalog from now on route completions and
	// resource subscriptions for upstreams' prompts, templates and
	// resources to their upstream.
	if fc, ok := cat.(interface{ ForwardToSources() }); ok && len(list) > 0 {
		fc.ForwardToSources()
	}
	for _, o := range list {
		o.Defaults()
		u, err := newUpstream(o, cat, deps)
		if err != nil {
			return nil, err
		}
		m.ups = append(m.ups, u)
	}
	return m, nil
}

// Start connects to every upstream in the background and keeps each
// connected (restarting stdio servers) until [Manager.Close].
func (m *Manager) Start(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.cancel != nil {
		return
	}
	ctx, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for _, u := range m.ups {
		if u.opts.Isolation == IsolationPerPrincipal {
			u.pool = newPool(ctx, u)
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				<-ctx.Done()
				u.pool.wait()
			}()
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			u.run(ctx)
		}()
	}
}

// Close disconnects every upstream, stops the stdio servers (stdin closed,
// then SIGTERM, then SIGKILL, each after the upstream's stop_grace) and
// returns when all is stopped.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	cancel := m.cancel
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	m.wg.Wait()
	return nil
}

// Ready returns nil when every required upstream is connected and its
// tools are in the catalog, and otherwise an error naming those that are
// not.
func (m *Manager) Ready(context.Context) error {
	var down []string
	for _, u := range m.ups {
		if u.opts.Required && !u.ready() {
			down = append(down, u.opts.Name)
		}
	}
	if len(down) > 0 {
		return fmt.Errorf("upstream: not connected: %s", strings.Join(down, ", "))
	}
	return nil
}

// Required reports whether any upstream is required, that is whether
// [Manager.Ready] can fail.
func (m *Manager) Required() bool {
	for _, u := range m.ups {
		if u.opts.Required {
			return true
		}
	}
	return false
}

// newClient returns the SDK client an upstream connects with, whose
// notification handlers feed u.
func newClient(u *upstream) *sdk.Client {
	c := sdk.NewClient(u.impl(), &sdk.ClientOptions{
		Logger: u.logger,
		// Elicitation, sampling and roots are offered so that an upstream
		// of an older era may ask its caller during a call (relay.go); a
		// caller that cannot answer has the request refused. A 2026-07-28
		// upstream is sent the caller's own capabilities with each call
		// instead (caller.go).
		Capabilities: &sdk.ClientCapabilities{
			Elicitation: &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}, URL: &sdk.URLElicitationCapabilities{}},
			//lint:ignore SA1019 the 2026-07-28 revision deprecates MCP logging, sampling and roots; clients of earlier revisions still use them
			RootsV2: &sdk.RootCapabilities{},
		},
		// A 2026-07-28 upstream's input-required results are passed to
		// the caller or fulfilled by Portcullis itself (mrtr.go), never by
		// the SDK client.
		MultiRoundTrip:             &sdk.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler:         u.elicit,
		ElicitationCompleteHandler: u.elicitationComplete,
		//lint:ignore SA1019 the 2026-07-28 revision deprecates MCP logging, sampling and roots; clients of earlier revisions still use them
		CreateMessageWithToolsHandler: u.createMessage,
		//lint:ignore SA1019 the 2026-07-28 revision deprecates MCP logging, sampling and roots; clients of earlier revisions still use them
		LoggingMessageHandler:       u.log,
		ToolListChangedHandler:      func(context.Context, *sdk.ToolListChangedRequest) { u.changed() },
		PromptListChangedHandler:    func(context.Context, *sdk.PromptListChangedRequest) { u.changed() },
		ResourceListChangedHandler:  func(context.Context, *sdk.ResourceListChangedRequest) { u.changed() },
		ProgressNotificationHandler: u.forwardProgress,
		ResourceUpdatedHandler: func(ctx context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			u.cat.ResourceUpdated(ctx, req.Params.URI)
		},
	})
	registerTaskMethods(c)
	c.AddReceivingMiddleware(u.receiving)
	return c
}
