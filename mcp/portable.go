//lint:file-ignore SA1019 a legacy session keeps the log level a client of a revision before 2026-07-28 set, which that revision deprecates

package mcp

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/loopback"
	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
)

// sharedSessions makes legacy sessions portable between replicas: a
// request naming a session is checked against the [SessionStore] (which
// restarts its idle timeout), and a replica that does not hold the session
// adopts it: it connects a copy of its own to the SDK server, already
// initialized with the record's parameters, under the same id. A session
// is made the same way: a copy of this replica's, whose initialize writes
// the record.
//
// A copy this replica holds is trusted without reading the record again
// (see trusts) while the bus has listened without a gap since the record
// was last read or written here, the bus has not said that the session
// ended or its record changed, and less than a tenth of the idle timeout
// has passed since: a DELETE on any replica says so on the bus before it
// answers, and the record's idle timeout, restarted by that read, has
// nine tenths of it left. A session whose requests keep coming costs the
// store a read per replica and tenth of the idle timeout, not one per
// request; the price is that a session idle for more than nine tenths of
// the timeout may be ended before all of it.
//
// What a session's streams carry is kept in [SessionEvents], shared by
// every replica: the standalone GET stream is served from there on any
// replica (sharedstream.go), whichever replica's copy sent a notification,
// and Last-Event-ID replays on any replica. A client's answer to a
// server→client request is published to every replica, whose copy of the
// session hands it to the call that waits for it.
type sharedSessions struct {
	store    SessionStore
	ttl      time.Duration    // the idle timeout, of records and copies
	now      func() time.Time // the clock of trust in copies; tests set theirs
	server   *sdk.Server
	events   SessionEvents
	sdkStore *sharedEventStore // the SDK's view of events, for every copy
	onAdopt  func(context.Context)
	onAnswer func(context.Context)
	logger   *slog.Logger

	mu      sync.Mutex
	local   map[string]*localSession // by id: the copies this replica holds
	byKey   map[string]string        // [SessionKey] → id, of local
	watches map[string]map[*watch]struct{}

	// busUp is set once the bus listens. epoch counts its gaps (and its
	// start): a copy read in an earlier epoch may have missed that its
	// session ended. changes counts what the bus said of any session's
	// end or record, so that a read of a record that overlapped one of
	// them is not trusted.
	busUp   atomic.Bool
	epoch   atomic.Uint64
	changes atomic.Uint64

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

// trustFraction is the part of the idle timeout after which a copy's
// record is read again, restarting its idle timeout (see trusts).
const trustFraction = 10

// localSession is this replica's copy of a session.
type localSession struct {
	ss        *sdk.ServerSession
	transport *sdk.StreamableServerTransport
	events    *sharedEventStore
	principal string        // the record's
	ttl       time.Duration // the idle timeout

	mu         sync.Mutex
	level      sdk.LoggingLevel // the level the copy logs at
	posts      int              // POSTs in flight
	streams    int              // GET streams open
	timer      *time.Timer      // the idle timeout; nil once stopped
	subscribed map[string]bool  // the resources the copy is subscribed to
	version    string           // the protocol version the session negotiated
	readAt     time.Time        // when the record was last read or written here; zero: not trusted
	readEpoch  uint64           // sharedSessions.epoch then
	ended      bool             // closed, or the bus said the session ended
}

// readMark is the state of the bus as a read or write of a record begins.
type readMark struct {
	at             time.Time
	epoch, changes uint64
}

func (s *sharedSessions) mark() readMark {
	return readMark{epoch: s.epoch.Load(), changes: s.changes.Load(), at: s.now()}
}

// noteRead notes that the record of ls's session was read or written,
// negotiating version, in a step begun at m: ls is trusted from then on,
// unless the bus said something of any session meanwhile.
func (s *sharedSessions) noteRead(ls *localSession, m readMark, version string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if version != "" {
		ls.version = version
	}
	if s.changes.Load() != m.changes || ls.ended {
		return
	}
	ls.readAt, ls.readEpoch = m.at, m.epoch
}

// trusts reports whether a request of the session of ls may be served
// without reading its record: ls is live, the bus has listened without a
// gap since the record was read or written here and has not said since
// that the session ended or changed, and less than a tenth of the idle
// timeout has passed since.
func (s *sharedSessions) trusts(ls *localSession) bool {
	if !s.busUp.Load() {
		return false
	}
	epoch, now := s.epoch.Load(), s.now()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	age := now.Sub(ls.readAt)
	return !ls.ended && !ls.readAt.IsZero() && ls.readEpoch == epoch && age >= 0 && age < ls.ttl/trustFraction
}

// distrust makes the next request of ls's session read its record; ended
// says that the session ended.
func (ls *localSession) distrust(ended bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.readAt = time.Time{}
	ls.ended = ls.ended || ended
}

// close closes the copy, trusted no more.
func (ls *localSession) close() {
	ls.distrust(true)
	ls.ss.Close()
}

// principalKeyContext carries the caller's limits key from the HTTP
// handler to the middleware that writes the record at initialize.
type principalKeyContext struct{}

func newSharedSessions(store SessionStore, ttl time.Duration, server *sdk.Server, deps Deps) *sharedSessions {
	if store == nil {
		return nil
	}
	s := &sharedSessions{
		store: store, ttl: ttl, now: time.Now, server: server, events: deps.Events,
		onAdopt: deps.OnSessionAdopted, onAnswer: deps.OnAnswerForwarded, logger: deps.Logger,
		local: map[string]*localSession{}, byKey: map[string]string{}, watches: map[string]map[*watch]struct{}{},
	}
	if s.events == nil {
		s.events = NewMemorySessionEvents(nil, defaultEventsKept)
	}
	if s.onAdopt == nil {
		s.onAdopt = func(context.Context) {}
	}
	if s.onAnswer == nil {
		s.onAnswer = func(context.Context) {}
	}
	replayed := deps.OnEventsReplayed
	if replayed == nil {
		replayed = func(context.Context, int) {}
	}
	s.sdkStore = &sharedEventStore{events: s.events, ttl: ttl, replayed: replayed, appended: s.appended, logger: s.logger, held: map[[2]string]*heldStream{}, resumeWait: resumeWait,
		// Called under the copy's connection lock, maybe while connect
		// holds s.mu: forget the copy on a goroutine of its own.
		closed: func(id string) { go s.ended(id) }}
	return s
}

// defaultEventsKept is how many events of a stream the in-process log
// keeps when no [SessionEvents] is given.
const defaultEventsKept = 1000

// lookup returns the copy of session id this replica holds, or nil.
func (s *sharedSessions) lookup(id string) *localSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.local[id]
}

// lookupKey returns the id and copy of the session keyed key that this
// replica holds; nil when it holds none.
func (s *sharedSessions) lookupKey(key string) (string, *localSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.byKey[key]
	return id, s.local[id]
}

// ended stops holding the copy of session id, which has ended: closed
// here (its idle timeout, a DELETE, the bus saying it ended) or by the SDK
// (a failed write). The SDK tells the copy's event store (see
// sharedEventStore.SessionClosed), so that no goroutine per idle session
// waits for the end. A copy is forgotten only by its end, and a new copy
// of id made only once it is, so the copy held under id is the one that
// ended.
func (s *sharedSessions) ended(id string) {
	ls := s.lookup(id)
	if ls == nil {
		return // its initialize failed before it was held
	}
	ls.distrust(true)
	ls.stopTimer()
	s.forget(id, ls)
}

// forget stops holding ls under id, unless another copy took its place.
func (s *sharedSessions) forget(id string, ls *localSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.local[id] == ls {
		delete(s.local, id)
		delete(s.byKey, SessionKey(id))
	}
}

// record writes the record of a session that a copy of this replica just
// initialized, before the client gets its id.
func (s *sharedSessions) record(ctx context.Context, ss *sdk.ServerSession, params *sdk.InitializeParams, res *sdk.InitializeResult) error {
	key, _ := ctx.Value(principalKeyContext{}).(string)
	rec := SessionRecord{Principal: PrincipalHash(key), ProtocolVersion: res.ProtocolVersion, Initialize: params}
	m := s.mark()
	if err := s.store.Put(ctx, ss.ID(), rec, s.ttl); err != nil {
		return err
	}
	if ls := s.lookup(ss.ID()); ls != nil && ls.ss == ss {
		s.noteRead(ls, m, rec.ProtocolVersion)
	}
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
	if err != nil || !ok || rec.LogLevel == level {
		return err // a copy following the record, or nothing to keep
	}
	rec.LogLevel = level
	if err := s.store.Put(ctx, id, rec, s.ttl); err != nil {
		return err
	}
	// The other replicas' copies, trusted, read the record again.
	return s.publish(ctx, busMessage{Kind: busRecord, Key: SessionKey(id)})
}

// subscribed keeps in the session's record that its copy ss subscribed to
// uri (or unsubscribed, when !on), and tells the replicas whose stream of
// the session must follow it.
func (s *sharedSessions) subscribed(ctx context.Context, ss *sdk.ServerSession, uri string, on bool) error {
	id := ss.ID()
	if ls := s.lookup(id); ls != nil && ls.ss == ss {
		ls.mu.Lock()
		if on {
			ls.subscribed[uri] = true
		} else {
			delete(ls.subscribed, uri)
		}
		ls.mu.Unlock()
	}
	rec, ok, err := s.store.Get(ctx, id, s.ttl)
	if err != nil || !ok {
		return err
	}
	if slices.Contains(rec.Subscriptions, uri) == on {
		return nil // a copy following the record
	}
	if on {
		rec.Subscriptions = append(rec.Subscriptions, uri)
	} else {
		rec.Subscriptions = slices.DeleteFunc(rec.Subscriptions, func(u string) bool { return u == uri })
	}
	if err := s.store.Put(ctx, id, rec, s.ttl); err != nil {
		return err
	}
	return s.publish(ctx, busMessage{Kind: busSubscriptions, Key: SessionKey(id)})
}

// connect connects a copy of session id under this replica and holds it:
// initialized with rec's parameters, or, for a nil rec, awaiting its
// initialize. The copy ends after the idle timeout without a request here.
// It returns the copy this replica already holds, if any.
func (s *sharedSessions) connect(ctx context.Context, id, principal string, rec *SessionRecord) (ls *localSession, adopted bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ls := s.local[id]; ls != nil {
		return ls, false, nil
	}
	t := &sdk.StreamableServerTransport{SessionID: id, EventStore: s.sdkStore}
	var opts *sdk.ServerSessionOptions
	var level sdk.LoggingLevel
	var version string
	if rec != nil {
		opts = &sdk.ServerSessionOptions{State: &sdk.ServerSessionState{
			InitializeParams:          rec.Initialize,
			InitializedParams:         &sdk.InitializedParams{},
			NegotiatedProtocolVersion: rec.ProtocolVersion,
			LogLevel:                  rec.LogLevel,
		}}
		level, version = rec.LogLevel, rec.ProtocolVersion
	}
	ss, err := s.server.Connect(ctx, t, opts)
	if err != nil {
		return nil, false, err
	}
	ls = &localSession{ss: ss, transport: t, events: s.sdkStore, principal: principal, level: level, version: version, ttl: s.ttl, subscribed: map[string]bool{}}
	ls.timer = time.AfterFunc(s.ttl, func() { ss.Close() })
	s.local[id] = ls
	s.byKey[SessionKey(id)] = id
	return ls, rec != nil, nil
}

// ServeHTTP serves a request of the session. The idle timeout is paused
// while a request runs, as the SDK handler pauses its own. The stream of
// a POST is held until the POST ends (see [sharedEventStore]), and
// written to the log only when the client went before the end or a write
// to it failed.
func (ls *localSession) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	post := r.Method == http.MethodPost
	ls.begin(post)
	defer ls.end(post)
	if !post {
		ls.transport.ServeHTTP(w, r)
		return
	}
	r, release := ls.events.hold(r, ls.ss.ID())
	dw := &deliveryWriter{ResponseWriter: w}
	defer func() { release(r.Context().Err() == nil && !dw.failed.Load()) }()
	ls.transport.ServeHTTP(dw, r)
}

// begin notes a request of the copy in flight (a POST, or a GET stream),
// pausing its idle timeout.
func (ls *localSession) begin(post bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.timer != nil && ls.posts+ls.streams == 0 {
		ls.timer.Stop()
	}
	if post {
		ls.posts++
	} else {
		ls.streams++
	}
}

// end ends a request begun with begin, restarting the idle timeout when
// it was the last one.
func (ls *localSession) end(post bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if post {
		ls.posts--
	} else {
		ls.streams--
	}
	if ls.timer != nil && ls.posts+ls.streams == 0 {
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

// serveSharedInitialize serves a legacy initialize when sessions are
// shared: a copy of a new session on this replica, whose initialize
// writes the record (sessionRecordMiddleware).
func (h *Handler) serveSharedInitialize(w http.ResponseWriter, r *http.Request, key string) string {
	s := h.shared
	if !h.sessionRequestValid(w, r) {
		return ""
	}
	id := rand.Text()
	// The record written at initialize names the caller; the copy's
	// handlers run in the context it is connected in.
	r = r.WithContext(context.WithValue(r.Context(), principalKeyContext{}, key))
	ls, _, err := s.connect(context.WithoutCancel(r.Context()), id, PrincipalHash(key), nil)
	if err != nil {
		h.logger.ErrorContext(r.Context(), "connecting a session", "error", err)
		http.Error(w, "failed connection", http.StatusInternalServerError)
		return ""
	}
	w.Header().Set(mcpheader.SessionID, id)
	ls.ServeHTTP(w, r)
	if ls.ss.InitializeParams() == nil {
		ls.ss.Close() // the initialize failed: no session
		return ""
	}
	return id
}

// sessionRequestValid checks what the SDK handler checks of a request
// before it reaches a session's transport, and answers w as it would when
// the request fails.
func (h *Handler) sessionRequestValid(w http.ResponseWriter, r *http.Request) bool {
	// The SDK handler refuses a non-loopback Host on a loopback listener
	// (DNS rebinding).
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(interface{ String() string }); ok && loopback.Host(addr.String()) && !loopback.Host(r.Host) {
		http.Error(w, "Forbidden: invalid Host header", http.StatusForbidden)
		return false
	}
	// It refuses an MCP-Protocol-Version it does not support (a version
	// from 2026-07-28 on is the SDK's to answer, as there).
	if v := r.Header.Get(mcpheader.ProtocolVersion); v != "" && v < statelessEra && !slices.Contains(sdkVersions, v) {
		http.Error(w, "Bad Request: Unsupported protocol version (supported versions: "+strings.Join(sdkVersions, ",")+")", http.StatusBadRequest)
		return false
	}
	accept := strings.Join(r.Header.Values("Accept"), ",")
	switch r.Method {
	case http.MethodPost:
		if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) != "application/json" {
			http.Error(w, "Content-Type must be 'application/json'", http.StatusUnsupportedMediaType)
			return false
		}
		if !accepts(accept, "application/json") || !accepts(accept, "text/event-stream") {
			http.Error(w, "Accept must contain both 'application/json' and 'text/event-stream'", http.StatusBadRequest)
			return false
		}
	case http.MethodGet:
		if !accepts(accept, "text/event-stream") {
			http.Error(w, "Accept must contain 'text/event-stream' for GET requests", http.StatusBadRequest)
			return false
		}
	}
	return true
}

// accepts reports whether the Accept header value accept names mediaType
// (or a wildcard covering it).
func accepts(accept, mediaType string) bool {
	major, _, _ := strings.Cut(mediaType, "/")
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, _ := strings.Cut(part, ";")
		switch strings.TrimSpace(mt) {
		case mediaType, major + "/*", "*/*":
			return true
		}
	}
	return false
}

// sharedRequest is what the handler found in the body of a POST to a
// shared session.
type sharedRequest struct {
	answers     bool // only answers to server→client requests
	initialized bool // the initialized notification alone
}

// serveShared serves a legacy request naming a session (POST, GET or
// DELETE) when sessions are shared: the record decides, on every replica
// alike, or the copy this replica holds while it is trusted (see
// [sharedSessions.trusts]). No record is 404, as the SDK answers an
// unknown session; a record of another caller is 403, as the SDK answers
// a session of another user; DELETE removes the record and the session's
// events, so that every replica answers 404 next, and ends every
// replica's copy.
func (h *Handler) serveShared(w http.ResponseWriter, r *http.Request, kind sharedRequest) {
	answers := kind.answers
	s := h.shared
	ctx := r.Context()
	id := r.Header.Get(mcpheader.SessionID)
	if !h.sessionRequestValid(w, r) {
		return
	}
	caller := PrincipalHash(h.principalKey(r))
	ls := s.lookup(id)
	trusted := ls != nil && s.trusts(ls)
	var rec SessionRecord
	var err error
	m := s.mark()
	if trusted {
		ls.mu.Lock()
		rec = SessionRecord{Principal: ls.principal, ProtocolVersion: ls.version}
		ls.mu.Unlock()
	} else {
		var found bool
		rec, found, err = s.store.Get(ctx, id, s.ttl)
		switch {
		case err != nil:
			// Without the store, serve what this replica holds as it would
			// without sharing; refuse what it would have to adopt.
			if n, log := s.storeFailed(time.Now()); log {
				h.logger.WarnContext(ctx, "session store failed; serving only the sessions this replica holds", "error", err, "failures", n)
			}
			if ls == nil || r.Method == http.MethodDelete || answers {
				limits.WriteRefusal(w, http.StatusServiceUnavailable, 5*time.Second, "Service unavailable: the session store did not answer. Retry later.")
				return
			}
			ls.mu.Lock()
			rec.ProtocolVersion = ls.version
			ls.mu.Unlock()
		case !found || rec.Initialize == nil:
			if ls != nil {
				ls.close()
			}
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
	}
	if err != nil && ls.principal != caller || err == nil && rec.Principal != caller {
		http.Error(w, "session user mismatch", http.StatusForbidden)
		return
	}

	key := SessionKey(id)
	switch {
	case r.Method == http.MethodDelete:
		if err := errors.Join(s.store.Delete(ctx, id), s.events.Delete(ctx, key)); err != nil {
			h.logger.WarnContext(ctx, "deleting a session", "error", err)
			limits.WriteRefusal(w, http.StatusServiceUnavailable, 5*time.Second, "Service unavailable: the session store did not answer. Retry later.")
			return
		}
		// Every replica's copy ends, and none is trusted from now on.
		if err := s.publish(ctx, busMessage{Kind: busEnded, Key: key}); err != nil {
			h.logger.WarnContext(ctx, "telling replicas a session ended", "error", err)
		}
		if ls != nil {
			ls.close()
		}
		w.WriteHeader(http.StatusNoContent)
		return
	case answers:
		// The call waiting for an answer may be on any replica: every
		// replica's copy of the session gets it, and a copy that sent no
		// such request drops it.
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = s.publish(ctx, busMessage{Kind: busAnswer, Key: key, Body: body})
		}
		if err != nil {
			h.logger.WarnContext(ctx, "forwarding an answer", "error", err)
			limits.WriteRefusal(w, http.StatusServiceUnavailable, 5*time.Second, "Service unavailable: the answer could not be forwarded. Retry later.")
			return
		}
		s.onAnswer(ctx)
		w.WriteHeader(http.StatusAccepted)
		return
	}

	if ls == nil && kind.initialized {
		// A copy made here from the record is initialized already: the
		// client's initialized notification is for the copy that answered
		// its initialize, on whichever replica.
		w.WriteHeader(http.StatusAccepted)
		return
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
	if err == nil && !trusted {
		s.noteRead(ls, m, rec.ProtocolVersion)
		h.syncLevel(ctx, id, ls, rec.LogLevel)
	}
	if r.Method == http.MethodGet {
		h.serveSharedGET(w, r, id, ls, rec.ProtocolVersion)
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
	ls, adopted, err := h.shared.connect(context.WithoutCancel(r.Context()), id, rec.Principal, &rec)
	if err != nil {
		h.sessions.release(key, "")
		return nil, err
	}
	h.sessions.release(key, id)
	if adopted {
		h.shared.onAdopt(r.Context())
	}
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
				if !ok {
					return res, err
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
			case *sdk.SubscribeRequest:
				if werr := s.subscribed(ctx, ss, r.Params.URI, true); werr != nil {
					s.logger.WarnContext(ctx, "keeping a session's subscription", "error", werr)
				}
			case *sdk.UnsubscribeRequest:
				if werr := s.subscribed(ctx, ss, r.Params.URI, false); werr != nil {
					s.logger.WarnContext(ctx, "keeping a session's subscription", "error", werr)
				}
			}
			return res, err
		}
	}
}
