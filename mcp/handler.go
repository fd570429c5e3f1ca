package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/jsonrpcerr"
	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
	"github.com/portcullis-mcp/portcullis/internal/mcpmethod"
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
	direct    *directCalls   // calls served without the SDK (direct.go)
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

// ServeHTTP implements [http.Handler].
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.cors(w, r) {
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.servePOST(w, r)
	case http.MethodGet, http.MethodDelete:
		if h.stateful == nil || r.Header.Get(mcpheader.ProtocolVersion) >= statelessEra {
			w.Header().Set("Allow", "POST")
			http.Error(w, "Method Not Allowed: this endpoint keeps no sessions for this protocol version", http.StatusMethodNotAllowed)
			return
		}
		if h.shared != nil {
			h.shared.serve(w, r, sharedRequest{})
			return
		}
		if r.Method == http.MethodGet {
			h.streams.serve(w, r, h.stateful)
			return
		}
		h.stateful.ServeHTTP(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE, OPTIONS")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

func (h *Handler) servePOST(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			h.limitHook(r.Context(), limits.Event{Limit: limits.LimitBodySize})
			jsonrpcerr.Write(w, http.StatusRequestEntityTooLarge, nil, jsonrpcerr.InvalidRequest,
				fmt.Sprintf("Request body exceeds %d bytes.", mbe.Limit))
			return
		}
		if errors.Is(err, limits.ErrBodyReadTimeout) {
			w.Header().Set("Connection", "close")
			jsonrpcerr.Write(w, http.StatusRequestTimeout, nil, jsonrpcerr.ServerError, "Request Timeout: the request body did not arrive in time.")
			return
		}
		jsonrpcerr.Write(w, http.StatusBadRequest, nil, jsonrpcerr.ParseError, "Could not read the request body.")
		return
	}
	msgs, jerr := parseMessages(body)
	if jerr != nil {
		jsonrpcerr.Write(w, http.StatusBadRequest, jerr.id, jerr.code, jerr.msg)
		return
	}
	modern := isStatelessEra(r.Header, msgs)
	if !modern {
		// The SDK answers an unknown legacy method with a plain-text 400;
		// clients are owed a JSON-RPC error naming the method.
		for _, m := range msgs {
			if m.Method != "" && len(m.ID) > 0 && !mcpmethod.IsRequest(m.Method) {
				jsonrpcerr.Write(w, http.StatusBadRequest, m.ID, jsonrpcerr.MethodNotFound, fmt.Sprintf("Method not found: %q.", m.Method))
				return
			}
		}
	}
	if v := r.Header.Get(mcpheader.ProtocolVersion); !modern && isBatch(body) && v >= firstVersionWithoutBatches && slices.Contains(sdkVersions, v) {
		// The SDK refuses it too, in plain text and only where it put
		// the version in the request's context; a JSON-RPC client is
		// owed a JSON-RPC error, as on stdio.
		jsonrpcerr.Write(w, http.StatusBadRequest, nil, jsonrpcerr.InvalidRequest, "Invalid Request: JSON-RPC batches are not supported in protocol version "+v+".")
		return
	}
	if modern && len(msgs) == 1 && isTaskMethod(msgs[0].Method) {
		h.serveTask(w, r, msgs[0])
		return
	}
	// A batch is the SDK's to answer call by call: its middleware gate
	// answers each call of a tool the caller does not see in that call's
	// place, and the other calls are served. Refusing the whole body with
	// one call's error would leave the others unanswered.
	if h.gate != nil && !isBatch(body) && !h.gateTools(w, r, msgs) {
		return
	}
	plain := modern && onlyResponse(msgs)
	if plain && h.serveDirect(w, r, body, msgs[0]) {
		return
	}
	r.Body = &bodyReader{Reader: bytes.NewReader(body)}
	r.ContentLength = int64(len(body))
	r.Header.Del(RequestIDHeader)
	if len(msgs) == 1 && msgs[0].Method != "" && len(msgs[0].ID) > 0 {
		r.Header.Set(RequestIDHeader, idText(msgs[0].ID))
	}

	switch {
	case plain:
		h.plain.ServeHTTP(w, r)
	case h.stateful == nil || modern:
		h.stateless.ServeHTTP(w, r)
	case r.Header.Get(mcpheader.SessionID) != "" && h.shared != nil:
		h.shared.serve(w, r, sharedRequest{answers: allAnswers(msgs), initialized: onlyInitialized(msgs)})
	case r.Header.Get(mcpheader.SessionID) != "":
		h.stateful.ServeHTTP(w, r)
	case isInitialize(msgs):
		h.serveInitialize(w, r)
	default:
		h.stateless.ServeHTTP(w, r)
	}
}

// serveInitialize serves a legacy initialize through the session caps:
// a principal holding its share is refused with 429, a full server with
// 503; both with Retry-After and a JSON-RPC error. A shared session is
// made by the shared sessions (sharedserve.go).
func (h *Handler) serveInitialize(w http.ResponseWriter, r *http.Request) {
	if h.shared != nil {
		h.shared.serveInitialize(w, r)
		return
	}
	key := h.sessions.principal(r)
	limit, ok := h.sessions.acquire(key)
	if !ok {
		h.sessions.refuse(w, r, limit)
		return
	}
	rec := &sessionIDRecorder{ResponseWriter: w}
	defer func() { h.sessions.release(key, rec.id) }()
	h.stateful.ServeHTTP(rec, r)
}

// bodyReader is the body handed on to the SDK: the bytes already read.
type bodyReader struct{ *bytes.Reader }

// Close does nothing: the original body was read and closed by the server.
func (*bodyReader) Close() error { return nil }
