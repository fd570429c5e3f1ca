package mcp

import (
	"context"
	"log/slog"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// Handler serves /mcp for every protocol era on one endpoint.
//
// Requests of revision 2026-07-28 and later, and legacy requests that carry
// no session, go to a stateless SDK handler, so any replica can answer them.
// A legacy initialize, and every request that names a session, goes to a
// session-keeping SDK handler. Handler also enforces the Origin allow-list
// and the body limit, and ends long-lived GET streams when draining.
type Handler struct {
	stateless *sdk.StreamableHTTPHandler
	// plain is stateless answering with a plain application/json body
	// instead of an event stream, for requests that can get nothing but
	// their response (see [onlyResponse]).
	plain     *sdk.StreamableHTTPHandler
	stateful  *sdk.StreamableHTTPHandler // nil when sessions are off
	shared    *sharedSessions            // nil: sessions live on the replica that made them
	origins   []string
	maxBody   int64
	logger    *slog.Logger
	gate      *toolGate // nil without a policy or an exposure
	stepUp    func(w http.ResponseWriter, r *http.Request, scopes []string)
	sessions  *sessionCap
	streams   *openStreams // the standalone GET streams, which Drain ends
	limitHook limits.Hook
	tasks     *tasks.Manager // nil: the tasks extension is off
	remote    *remoteTasks   // nil: no remote tasks
	direct    *directCalls   // calls served without the SDK (direct.go, directcalls.go)
}

// newHandler returns the /mcp handler for server, with opts defaulted and
// deps' logger and limit hook set (see [New]). gate applies the per-tool
// policy before the SDK sees a request; caps bound its sessions, and
// streams are its GET streams, which it shares with shared.
func newHandler(server *sdk.Server, opts Options, gate *toolGate, direct *directCalls, caps *sessionCap, streams *openStreams, shared *sharedSessions, deps Deps) *Handler {
	logger := deps.Logger
	get := func(*http.Request) *sdk.Server { return server }
	sdkLog := sdkLogger(logger)
	h := &Handler{
		sessions:  caps,
		streams:   streams,
		limitHook: deps.LimitHook,
		tasks:     deps.Tasks,
		remote:    newRemoteTasks(deps),
		direct:    direct,
		origins:   opts.AllowedOrigins,
		maxBody:   opts.MaxBodyBytes,
		logger:    logger,
		stateless: sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{
			Stateless:                    true,
			Logger:                       sdkLog,
			MaxRequestBodyBytes:          opts.MaxBodyBytes,
			PropagateRequestCancellation: true,
		}),
		plain: sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{
			Stateless:                    true,
			JSONResponse:                 true,
			Logger:                       sdkLog,
			MaxRequestBodyBytes:          opts.MaxBodyBytes,
			PropagateRequestCancellation: true,
		}),
	}
	if deps.Policy != nil {
		h.gate = gate
		h.stepUp = deps.StepUp
	}
	if deps.Exposure != nil {
		// An exposure hides tools the server has (the original names of
		// renamed ones): the SDK's header checks of a 2026-07-28 call
		// would tell them from tools that do not exist.
		h.gate = gate
	}
	if opts.Sessions == nil || *opts.Sessions {
		events := sdk.NewMemoryEventStore(nil)
		h.stateful = sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{
			Logger:              sdkLog,
			MaxRequestBodyBytes: opts.MaxBodyBytes,
			SessionTimeout:      opts.SessionIdleTimeout,
			EventStore:          events,
		})
		h.shared = shared
	}
	return h
}

// Start starts what the handler runs beside its requests until Close.
// With shared sessions ([Deps.SharedSessions]) that is its subscription
// to the bus between replicas; while the bus does not answer, it keeps
// trying in the background until ctx ends. Such a handler serves legacy
// sessions only between Start and Close, and answers 503 before and
// after. Without shared sessions Start does nothing. Call it once, before
// serving.
func (h *Handler) Start(ctx context.Context) {
	if h.shared != nil {
		h.shared.start(ctx)
	}
}

// Close ends what Start started and closes the copies of shared sessions
// this replica holds (the sessions go on, on the other replicas); it
// returns once none of the handler's goroutines is left. Call it once
// the server stopped serving ([http.Server.Shutdown]).
func (h *Handler) Close() error {
	if h.shared == nil {
		return nil
	}
	return h.shared.close()
}

// Drain ends every open GET stream and refuses new ones, so that an
// [http.Server.Shutdown] waits only for calls in flight. Clients reconnect to
// another replica.
func (h *Handler) Drain() { h.streams.drain() }
