package mcp

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/loopback"
	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// sharedRequest is what the handler found in the body of a POST to a
// shared session.
type sharedRequest struct {
	answers     bool // only answers to server→client requests
	initialized bool // the initialized notification alone
}

// sessionRequest is a request naming a shared session, as serve works it
// out.
type sessionRequest struct {
	sharedRequest
	id, key string
	copy    *sessionCopy         // this replica's copy of the session; nil: none yet
	rec     sharedsession.Record // the record, or what a copy knows of it
	read    bool                 // rec was read from the store for this request
	mark    readMark             // the bus as that read began
}

// serveInitialize serves a legacy initialize through the session caps:
// a copy of a new session on this replica, whose initialize writes the
// record (sessionRecordMiddleware).
func (s *sharedSessions) serveInitialize(w http.ResponseWriter, r *http.Request) {
	if s.refuseStopped(w) {
		return
	}
	key := s.caps.principal(r)
	limit, ok := s.caps.acquire(key)
	if !ok {
		s.caps.refuse(w, r, limit)
		return
	}
	var id string
	defer func() { s.caps.release(key, id) }()
	id = s.initialize(w, r, key)
}

// initialize serves an initialize admitted for the caller with the limits
// key key, and returns the id of the session it made; "" for none.
func (s *sharedSessions) initialize(w http.ResponseWriter, r *http.Request, key string) string {
	if !validSessionRequest(w, r) {
		return ""
	}
	id := rand.Text()
	// The record written at initialize names the caller; the copy's
	// handlers run in the context it is connected in.
	r = r.WithContext(context.WithValue(r.Context(), principalKeyContext{}, key))
	c, _, err := s.copies.connect(context.WithoutCancel(r.Context()), id, sharedsession.PrincipalHash(key), nil)
	if err != nil {
		s.logger.ErrorContext(r.Context(), "connecting a session", "error", err)
		http.Error(w, "failed connection", http.StatusInternalServerError)
		return ""
	}
	w.Header().Set(mcpheader.SessionID, id)
	c.ServeHTTP(w, r)
	if c.ss.InitializeParams() == nil {
		c.ss.Close() // the initialize failed: no session
		return ""
	}
	return id
}

// serve serves a legacy request naming a session (POST, GET or DELETE):
// the record decides, on every replica alike, or the copy this replica
// holds while it is trusted (see [sessionCopies.trusts]). No record is
// 404, as the SDK answers an unknown session; a record of another caller
// is 403, as the SDK answers a session of another user; DELETE removes
// the record and the session's events, so that every replica answers 404
// next, and ends every replica's copy.
func (s *sharedSessions) serve(w http.ResponseWriter, r *http.Request, kind sharedRequest) {
	if s.refuseStopped(w) || !validSessionRequest(w, r) {
		return
	}
	id := r.Header.Get(mcpheader.SessionID)
	q := &sessionRequest{sharedRequest: kind, id: id, copy: s.copies.lookup(id)}
	if q.copy != nil {
		q.key = q.copy.key // hashed once, as the copy was made
	} else {
		q.key = sharedsession.Key(id)
	}
	if !s.resolve(w, r, q) {
		return
	}
	switch {
	case r.Method == http.MethodDelete:
		s.delete(w, r, q)
		return
	case q.answers:
		s.forwardAnswers(w, r, q)
		return
	case q.copy == nil && q.initialized:
		// A copy made here from the record is initialized already: the
		// client's initialized notification is for the copy that answered
		// its initialize, on whichever replica.
		w.WriteHeader(http.StatusAccepted)
		return
	case q.copy == nil && !s.adopt(w, r, q):
		return
	}
	if q.read {
		s.copies.noteRead(q.copy, q.mark, q.rec.ProtocolVersion)
		s.syncLevel(r.Context(), q.copy, q.rec.LogLevel)
	}
	if r.Method == http.MethodGet {
		s.serveGET(w, r, q.id, q.copy, q.rec.ProtocolVersion)
		return
	}
	q.copy.ServeHTTP(w, r)
}

// resolve finds the session of q and checks that the caller owns it: from
// the copy this replica trusts, else from the record. It answers w and
// reports false when the request ends there.
func (s *sharedSessions) resolve(w http.ResponseWriter, r *http.Request, q *sessionRequest) bool {
	if q.copy != nil && s.copies.trusts(q.copy) {
		q.rec = q.copy.known()
	} else {
		q.mark = s.copies.mark()
		rec, found, err := s.store.Get(r.Context(), q.key, s.ttl)
		switch {
		case err != nil:
			if !s.withoutStore(w, r, q, err) {
				return false
			}
		case !found || rec.Initialize == nil:
			if q.copy != nil {
				q.copy.close()
			}
			http.Error(w, "session not found", http.StatusNotFound)
			return false
		default:
			q.rec, q.read = rec, true
		}
	}
	if q.rec.Principal != sharedsession.PrincipalHash(s.caps.principal(r)) {
		http.Error(w, "session user mismatch", http.StatusForbidden)
		return false
	}
	return true
}

// withoutStore decides a request of q when the store failed with err: it
// is served by the copy this replica holds, as it would be without
// sharing, unless it needs the store (to adopt the session, to delete it,
// or to forward answers), which 503 refuses.
func (s *sharedSessions) withoutStore(w http.ResponseWriter, r *http.Request, q *sessionRequest, err error) bool {
	if n, log := s.storeFailed(time.Now()); log {
		s.logger.WarnContext(r.Context(), "session store failed; serving only the sessions this replica holds", "error", err, "failures", n)
	}
	if q.copy == nil || r.Method == http.MethodDelete || q.answers {
		limits.WriteRefusal(w, http.StatusServiceUnavailable, 5*time.Second, "Service unavailable: the session store did not answer. Retry later.")
		return false
	}
	q.rec = q.copy.known()
	return true
}

// delete ends the session of q on every replica.
func (s *sharedSessions) delete(w http.ResponseWriter, r *http.Request, q *sessionRequest) {
	ctx := r.Context()
	if err := errors.Join(s.store.Delete(ctx, q.key), s.log.Delete(ctx, q.key)); err != nil {
		s.logger.WarnContext(ctx, "deleting a session", "error", err)
		limits.WriteRefusal(w, http.StatusServiceUnavailable, 5*time.Second, "Service unavailable: the session store did not answer. Retry later.")
		return
	}
	// Every replica's copy ends, and none is trusted from now on.
	if err := s.bus.publish(ctx, busMessage{Kind: busEnded, Key: q.key}); err != nil {
		s.logger.WarnContext(ctx, "telling replicas a session ended", "error", err)
	}
	if q.copy != nil {
		q.copy.close()
	}
	w.WriteHeader(http.StatusNoContent)
}

// forwardAnswers publishes the client's answers to server→client requests
// in r's body: the call waiting for one may be on any replica, so every
// replica's copy of the session gets them, and a copy that sent no such
// request drops them.
func (s *sharedSessions) forwardAnswers(w http.ResponseWriter, r *http.Request, q *sessionRequest) {
	ctx := r.Context()
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = s.bus.publish(ctx, busMessage{Kind: busAnswer, Key: q.key, Body: body})
	}
	if err != nil {
		s.logger.WarnContext(ctx, "forwarding an answer", "error", err)
		limits.WriteRefusal(w, http.StatusServiceUnavailable, 5*time.Second, "Service unavailable: the answer could not be forwarded. Retry later.")
		return
	}
	s.onAnswer(ctx)
	w.WriteHeader(http.StatusAccepted)
}

// adopt connects a copy of the session of q, from its record, within the
// session caps; a cap refuses as it refuses an initialize. It answers w
// and reports false when it could not.
func (s *sharedSessions) adopt(w http.ResponseWriter, r *http.Request, q *sessionRequest) bool {
	key := s.caps.principal(r)
	if limit, ok := s.caps.acquire(key); !ok {
		s.caps.refuse(w, r, limit)
		return false
	}
	c, adopted, err := s.copies.connect(context.WithoutCancel(r.Context()), q.id, q.rec.Principal, &q.rec)
	if err != nil {
		s.caps.release(key, "")
		s.logger.ErrorContext(r.Context(), "adopting a session", "error", err)
		http.Error(w, "failed connection", http.StatusInternalServerError)
		return false
	}
	s.caps.release(key, q.id)
	if adopted {
		s.onAdopt(r.Context())
	}
	q.copy = c
	return true
}

// validSessionRequest checks what the SDK handler checks of a request
// before it reaches a session's transport, and answers w as it would when
// the request fails.
func validSessionRequest(w http.ResponseWriter, r *http.Request) bool {
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
