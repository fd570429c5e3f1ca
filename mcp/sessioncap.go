package mcp

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
)

// DefaultMaxSessions bounds legacy sessions when mcp.max_sessions is not set.
const DefaultMaxSessions = 10000

// defaultSessionShare is the part of mcp.max_sessions one principal may
// hold when mcp.max_sessions_per_principal is not set: a tenth, so that
// one caller cannot take every session from the others.
const defaultSessionShare = 10

// sessionCap bounds the legacy sessions open at once, over all callers
// and per principal. It counts a session from its initialize, whether or
// not the client goes on to send initialized: it learns the session's id
// from the initialize response, and forgets it once the SDK no longer lists
// the session (closed by DELETE, the idle timeout, or a failed initialize).
// Forgetting is lazy, when a cap would refuse and when the sessions are
// counted, so that admitting a session costs no walk over all of them.
type sessionCap struct {
	max          int
	perPrincipal int            // 0: no per-principal share
	key          limits.KeyFunc // the principal of a request; nil: none
	server       *sdk.Server
	hook         limits.Hook // told of each refusal
	logger       *slog.Logger

	mu      sync.Mutex
	ids     map[string]string // open session id → its principal's key
	pending int               // initializes admitted whose session id is not known yet
	// byKey counts each principal's open and pending sessions; a key
	// with none is deleted. The empty key (no principal) is not counted.
	byKey map[string]int
}

// newSessionCap returns the caps on the sessions of server: maxSessions
// in all (DefaultMaxSessions when not positive), perPrincipal (at most
// that) for each principal key names. It tells hook and logger of each
// refusal.
func newSessionCap(maxSessions, perPrincipal int, server *sdk.Server, key limits.KeyFunc, hook limits.Hook, logger *slog.Logger) *sessionCap {
	if maxSessions <= 0 {
		maxSessions = DefaultMaxSessions
	}
	return &sessionCap{max: maxSessions, perPrincipal: min(perPrincipal, maxSessions), key: key, server: server,
		hook: hook, logger: logger, ids: map[string]string{}, byKey: map[string]int{}}
}

// principal returns the limits key of r's caller; empty without one.
func (c *sessionCap) principal(r *http.Request) string {
	if c.key == nil {
		return ""
	}
	return c.key(r)
}

// acquire admits one initialize by the principal key ("" for none) unless
// a cap is reached, and reports which: [limits.LimitSessionsPrincipal] when
// the principal holds its share (it is refused even when the server has
// room), else [limits.LimitSessions] when the server is full.
func (c *sessionCap) acquire(key string) (limits.Limit, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.overPrincipal(key) || c.full() {
		c.prune()
	}
	switch {
	case c.overPrincipal(key):
		return limits.LimitSessionsPrincipal, false
	case c.full():
		return limits.LimitSessions, false
	}
	c.pending++
	if key != "" {
		c.byKey[key]++
	}
	return "", true
}

func (c *sessionCap) full() bool { return len(c.ids)+c.pending >= c.max }

func (c *sessionCap) overPrincipal(key string) bool {
	return key != "" && c.perPrincipal > 0 && c.byKey[key] >= c.perPrincipal
}

// release ends an initialize admitted for key; id is the session it
// created, or "" when it created none.
func (c *sessionCap) release(key, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending--
	if _, held := c.ids[id]; id != "" && !held {
		c.ids[id] = key
		return
	}
	// No session, or a session adopted again under an id still counted
	// (the copy it replaces is not pruned yet): one count each.
	c.forget(key)
}

// forget drops one session from key's count. c.mu must be held.
func (c *sessionCap) forget(key string) {
	if key == "" {
		return
	}
	if c.byKey[key]--; c.byKey[key] <= 0 {
		delete(c.byKey, key)
	}
}

// open returns the number of sessions open (after forgetting closed ones),
// and how many of them principal key holds, pending ones included.
func (c *sessionCap) open(key string) (total, byKey int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prune()
	return len(c.ids), c.byKey[key]
}

// prune forgets sessions the server no longer has. c.mu must be held.
func (c *sessionCap) prune() {
	live := make(map[string]bool, len(c.ids))
	for ss := range c.server.Sessions() {
		live[ss.ID()] = true
	}
	for id, key := range c.ids {
		if !live[id] {
			delete(c.ids, id)
			c.forget(key)
		}
	}
}

// refuse answers a session the caps refuse (an initialize, or a session
// to adopt): a principal holding its share with 429, a full server with
// 503; both with Retry-After and a JSON-RPC error.
func (c *sessionCap) refuse(w http.ResponseWriter, r *http.Request, limit limits.Limit) {
	c.hook(r.Context(), limits.Event{Limit: limit})
	if limit == limits.LimitSessionsPrincipal {
		var user string
		if ti := sdkauth.TokenInfoFromContext(r.Context()); ti != nil {
			user = ti.UserID
		}
		c.logger.InfoContext(r.Context(), "caller's session share reached; session refused",
			"user_id", user, "max_sessions_per_principal", c.perPrincipal)
		limits.WriteRefusal(w, http.StatusTooManyRequests, 5*time.Second,
			fmt.Sprintf("Too many requests: this caller already has %d sessions open, its share. Close sessions it no longer uses (HTTP DELETE with their Mcp-Session-Id), retry later, or use the stateless 2026-07-28 protocol.", c.perPrincipal))
		return
	}
	c.logger.WarnContext(r.Context(), "session cap reached; session refused", "max_sessions", c.max)
	limits.WriteRefusal(w, http.StatusServiceUnavailable, 5*time.Second,
		fmt.Sprintf("Service unavailable: the server has %d sessions open, its limit. Retry later, or use the stateless 2026-07-28 protocol.", c.max))
}

// sessionIDRecorder notes the Mcp-Session-Id the SDK sets on a response.
type sessionIDRecorder struct {
	http.ResponseWriter
	id string
}

func (s *sessionIDRecorder) WriteHeader(code int) {
	s.id = s.Header().Get(mcpheader.SessionID)
	s.ResponseWriter.WriteHeader(code)
}

func (s *sessionIDRecorder) Write(b []byte) (int, error) {
	if s.id == "" {
		s.id = s.Header().Get(mcpheader.SessionID)
	}
	return s.ResponseWriter.Write(b)
}

// Flush keeps SSE responses streaming.
func (s *sessionIDRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *sessionIDRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
