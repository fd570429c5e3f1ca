//lint:file-ignore SA1019 a legacy session keeps the log level a client of a revision before 2026-07-28 set, which that revision deprecates

package mcp

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/loopback"
	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
)

// sharedSessions makes legacy sessions portable between replicas: every
// request naming a session is checked against the [SessionStore] (which
// restarts its idle timeout), and a replica that does not hold the session
// adopts it: it connects a session of its own to the SDK server, already
// initialized with the record's parameters, under the same id.
//
// What is portable is request/response traffic. A server→client request
// is answered on the replica that sent it, notifications reach the client
// only through the replica that produced them, and Last-Event-ID replays
// only the events of the replica that holds the stream.
type sharedSessions struct {
	store   SessionStore
	ttl     time.Duration // the idle timeout, of records and adopted copies
	server  *sdk.Server
	events  sdk.EventStore // the SDK handler's, set by newHandler
	sdkSide http.Handler   // the SDK handler, set by newHandler
	onAdopt func(context.Context)
	logger  *slog.Logger

	mu    sync.Mutex
	local map[string]*localSession // by id: the sessions this replica holds

	// failMu guards the counting of store failures, logged at most once
	// per storeFailureLogEvery so that an outage is not a line per request.
	failMu      sync.Mutex
	failures    int       // since the last line logged
	lastFailLog time.Time // when that line was logged
}

// storeFailureLogEvery bounds how often a session store outage is logged.
const storeFailureLogEvery = 30 * time.Second

// storeFailed counts a failure of the store at now and reports whether to
// log it, with the failures counted since the last line (this one
// included).
func (s *sharedSessions) storeFailed(now time.Time) (n int, log bool) {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	s.failures++
	if !s.lastFailLog.IsZero() && now.Sub(s.lastFailLog) < storeFailureLogEvery {
		return s.failures, false
	}
	n, s.failures, s.lastFailLog = s.failures, 0, now
	return n, true
}

// localSession is one session this replica holds: made by the SDK handler
// at initialize, or adopted.
type localSession struct {
	ss *sdk.ServerSession
	// transport is the adopted session's; nil for the SDK handler's own.
	transport *sdk.StreamableServerTransport
	next      http.Handler  // what serves it: transport, or the SDK handler
	principal string        // the record's, for an adopted session
	ttl       time.Duration // the idle timeout of an adopted session

	mu    sync.Mutex
	level sdk.LoggingLevel // the level the session logs at
	posts int              // POSTs in flight
	timer *time.Timer      // the idle timeout of an adopted session; nil once stopped
}

// principalKeyContext carries the caller's limits key from the HTTP
// handler to the middleware that writes the record at initialize.
type principalKeyContext struct{}

func newSharedSessions(store SessionStore, ttl time.Duration, server *sdk.Server, deps Deps) *sharedSessions {
	if store == nil {
		return nil
	}
	onAdopt := deps.OnSessionAdopted
	if onAdopt == nil {
		onAdopt = func(context.Context) {}
	}
	return &sharedSessions{store: store, ttl: ttl, server: server, onAdopt: onAdopt, logger: deps.Logger, local: map[string]*localSession{}}
}

// lookup returns the session id this replica holds, or nil.
func (s *sharedSessions) lookup(id string) *localSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.local[id]
}

// hold lists ls as held under id until its session ends.
func (s *sharedSessions) hold(id string, ls *localSession) {
	s.mu.Lock()
	s.local[id] = ls
	s.mu.Unlock()
	go s.forgetAtEnd(id, ls)
}

// forgetAtEnd waits for the session of ls to end, then stops holding it.
func (s *sharedSessions) forgetAtEnd(id string, ls *localSession) {
	_ = ls.ss.Wait()
	ls.stopTimer()
	s.forget(id, ls)
}

// forget stops holding ls under id, unless another copy took its place.
func (s *sharedSessions) forget(id string, ls *localSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.local[id] == ls {
		delete(s.local, id)
	}
}

// record writes the record of a session the SDK handler just initialized,
// before the client gets its id, and holds the session as this replica's.
func (s *sharedSessions) record(ctx context.Context, ss *sdk.ServerSession, params *sdk.InitializeParams, res *sdk.InitializeResult) error {
	key, _ := ctx.Value(principalKeyContext{}).(string)
	rec := SessionRecord{Principal: PrincipalHash(key), ProtocolVersion: res.ProtocolVersion, Initialize: params}
	if err := s.store.Put(ctx, ss.ID(), rec, s.ttl); err != nil {
		return err
	}
	s.hold(ss.ID(), &localSession{ss: ss, next: s.sdkSide})
	return nil
}

// setLevel keeps a level the client set in the session's record, and
// notes it on this replica's copy, ss.
func (s *sharedSessions) setLevel(ctx context.Context, ss *sdk.ServerSession, level sdk.LoggingLevel) error {
	id := ss.ID()
	if ls := s.lookup(id); ls != nil && ls.ss == ss {
		ls.mu.Lock()
		ls.level = level
		ls.mu.Unlock()
	}
	rec, ok, err := s.store.Get(ctx, id, s.ttl)
	if err != nil || !ok {
		return err
	}
	rec.LogLevel = level
	return s.store.Put(ctx, id, rec, s.ttl)
}

// adopt connects a copy of the session of rec under id, unless this
// replica holds one already, and returns it. The copy ends after the idle
// timeout without a request here.
func (s *sharedSessions) adopt(r *http.Request, id string, rec SessionRecord) (*localSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ls := s.local[id]; ls != nil {
		return ls, nil
	}
	t := &sdk.StreamableServerTransport{SessionID: id, EventStore: s.events}
	ss, err := s.server.Connect(r.Context(), t, &sdk.ServerSessionOptions{State: &sdk.ServerSessionState{
		InitializeParams:          rec.Initialize,
		InitializedParams:         &sdk.InitializedParams{},
		NegotiatedProtocolVersion: rec.ProtocolVersion,
		LogLevel:                  rec.LogLevel,
	}})
	if err != nil {
		return nil, err
	}
	ls := &localSession{ss: ss, transport: t, next: t, principal: rec.Principal, level: rec.LogLevel, ttl: s.ttl}
	ls.timer = time.AfterFunc(s.ttl, func() { ss.Close() })
	s.local[id] = ls
	go s.forgetAtEnd(id, ls)
	s.onAdopt(r.Context())
	return ls, nil
}

// ServeHTTP serves a request of the session. An adopted session's idle
// timeout is paused while a POST runs, as the SDK handler pauses its own.
func (ls *localSession) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		ls.next.ServeHTTP(w, r)
		return
	}
	ls.mu.Lock()
	if ls.timer != nil && ls.posts == 0 {
		ls.timer.Stop()
	}
	ls.posts++
	ls.mu.Unlock()
	defer ls.endPOST()
	ls.next.ServeHTTP(w, r)
}

// endPOST ends a POST of the session, restarting an adopted session's
// idle timeout when it was the last one.
func (ls *localSession) endPOST() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.posts--
	if ls.timer != nil && ls.posts == 0 {
		ls.timer.Reset(ls.ttl)
	}
}

func (ls *localSession) stopTimer() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.timer != nil {
		ls.timer.Stop()
		ls.timer = nil
	}
}

// stale reports whether ls logs at another level than want and has no
// POST in flight, so that it can be closed and adopted again.
func (ls *localSession) stale(want sdk.LoggingLevel) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.level != want && ls.posts == 0
}

// serveShared serves a legacy request naming a session (POST, GET or
// DELETE) when sessions are shared: the record decides, on every replica
// alike. No record is 404, as the SDK answers an unknown session; a record
// of another caller is 403, as the SDK answers a session of another user;
// DELETE removes the record, so that every replica answers 404 next.
func (h *Handler) serveShared(w http.ResponseWriter, r *http.Request) {
	s := h.shared
	ctx := r.Context()
	id := r.Header.Get(mcpheader.SessionID)
	// The SDK handler refuses a non-loopback Host on a loopback listener
	// (DNS rebinding); the adopted path does not pass through it.
	if addr, ok := ctx.Value(http.LocalAddrContextKey).(interface{ String() string }); ok && loopback.Host(addr.String()) && !loopback.Host(r.Host) {
		http.Error(w, "Forbidden: invalid Host header", http.StatusForbidden)
		return
	}
	caller := PrincipalHash(h.principalKey(r))
	rec, found, err := s.store.Get(ctx, id, s.ttl)
	ls := s.lookup(id)
	switch {
	case err != nil:
		// Without the store, serve what this replica holds as it would
		// without sharing; refuse what it would have to adopt.
		if n, log := s.storeFailed(time.Now()); log {
			h.logger.WarnContext(ctx, "session store failed; serving only the sessions this replica holds", "error", err, "failures", n)
		}
		if ls == nil || r.Method == http.MethodDelete {
			limits.WriteRefusal(w, http.StatusServiceUnavailable, 5*time.Second, "Service unavailable: the session store did not answer. Retry later.")
			return
		}
		if ls.transport != nil && ls.principal != caller {
			http.Error(w, "session user mismatch", http.StatusForbidden)
			return
		}
	case !found || rec.Initialize == nil:
		if ls != nil {
			ls.ss.Close()
		}
		http.Error(w, "session not found", http.StatusNotFound)
		return
	case rec.Principal != caller:
		http.Error(w, "session user mismatch", http.StatusForbidden)
		return
	}

	if r.Method == http.MethodDelete {
		if err := s.store.Delete(ctx, id); err != nil {
			h.logger.WarnContext(ctx, "deleting a session record", "error", err)
			limits.WriteRefusal(w, http.StatusServiceUnavailable, 5*time.Second, "Service unavailable: the session store did not answer. Retry later.")
			return
		}
		switch {
		case ls != nil && ls.transport == nil:
			h.stateful.ServeHTTP(w, r) // closes it and answers
		case ls != nil:
			ls.ss.Close()
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
		return
	}

	// A copy that logs at another level than the client last set (on
	// another replica) is closed and adopted again at that level, unless
	// a POST of it is running here. The SDK offers no way to set the
	// level of a session but the client's logging/setLevel.
	if err == nil && ls != nil && ls.stale(rec.LogLevel) {
		ls.ss.Close()
		s.forget(id, ls)
		ls = nil
	}
	if ls == nil {
		if ls, err = h.adopt(w, r, id, rec); ls == nil {
			if err != nil {
				h.logger.ErrorContext(ctx, "adopting a session", "error", err)
				http.Error(w, "failed connection", http.StatusInternalServerError)
			}
			return
		}
	}
	if r.Method == http.MethodGet {
		h.serveStream(w, r, ls)
		return
	}
	ls.ServeHTTP(w, r)
}

// adopt adopts session id of rec within the session caps; a cap refuses
// as it refuses an initialize. It returns nil when it answered w.
func (h *Handler) adopt(w http.ResponseWriter, r *http.Request, id string, rec SessionRecord) (*localSession, error) {
	key := h.principalKey(r)
	if limit, ok := h.sessions.acquire(key); !ok {
		h.refuseSession(w, r, limit)
		return nil, nil
	}
	ls, err := h.shared.adopt(r, id, rec)
	if err != nil {
		h.sessions.release(key, "")
		return nil, err
	}
	h.sessions.release(key, id)
	return ls, nil
}

// principalKey returns the limits key of r's caller; empty without one.
func (h *Handler) principalKey(r *http.Request) string {
	if h.sessions.key == nil {
		return ""
	}
	return h.sessions.key(r)
}

// sessionRecordMiddleware writes a legacy session's record when the SDK
// initializes it, and keeps the level logging/setLevel sets. A record
// that cannot be written fails the initialize: a session without one is
// not found on any replica.
func sessionRecordMiddleware(s *sharedSessions) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			ss, ok := req.GetSession().(*sdk.ServerSession)
			if !ok || ss == nil || ss.ID() == "" {
				return res, err
			}
			switch r := req.(type) {
			case *sdk.ServerRequest[*sdk.InitializeParams]:
				ir, ok := res.(*sdk.InitializeResult)
				if !ok || s.lookup(ss.ID()) != nil {
					return res, err // an adopted copy has no initialize
				}
				if werr := s.record(ctx, ss, r.Params, ir); werr != nil {
					s.logger.ErrorContext(ctx, "writing a session record", "error", werr)
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "The session could not be recorded. Retry the initialize."}
				}
			case *sdk.ServerRequest[*sdk.SetLoggingLevelParams]:
				if r.Params == nil {
					return res, err
				}
				if werr := s.setLevel(ctx, ss, r.Params.Level); werr != nil {
					s.logger.WarnContext(ctx, "keeping a session's log level", "error", werr)
				}
			}
			return res, err
		}
	}
}
