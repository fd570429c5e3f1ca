package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/limits"
)

// DefaultToolTimeout bounds a tool call when mcp.tool_timeout is not set.
const DefaultToolTimeout = 60 * time.Second

// DefaultMaxSessions bounds legacy sessions when mcp.max_sessions is not set.
const DefaultMaxSessions = 10000

// ToolTimeout overrides mcp.tool_timeout for one tool.
type ToolTimeout struct {
	// Tool is the tool's name.
	Tool string `yaml:"tool" schema:"required"`
	// Timeout bounds one call of the tool.
	Timeout time.Duration `yaml:"timeout" schema:"required"`
}

// toolTimeoutMap returns the per-tool overrides as a map.
func toolTimeoutMap(list []ToolTimeout) map[string]time.Duration {
	m := make(map[string]time.Duration, len(list))
	for _, t := range list {
		m[t.Tool] = t.Timeout
	}
	return m
}

func (o *Options) validateLimits() []error {
	var errs []error
	if o.ToolTimeout < 0 {
		errs = append(errs, errors.New("tool_timeout: must not be negative"))
	}
	if o.MaxSessions < 0 {
		errs = append(errs, errors.New("max_sessions: must not be negative"))
	}
	seen := map[string]bool{}
	for i, t := range o.ToolTimeouts {
		switch {
		case t.Tool == "":
			errs = append(errs, fmt.Errorf("tool_timeouts[%d].tool: required", i))
		case seen[t.Tool]:
			errs = append(errs, fmt.Errorf("tool_timeouts[%d].tool: duplicate tool %q", i, t.Tool))
		}
		seen[t.Tool] = true
		if t.Timeout <= 0 {
			errs = append(errs, fmt.Errorf("tool_timeouts[%d].timeout: must be positive", i))
		}
	}
	return errs
}

// toolTimeoutMiddleware bounds every tools/call by the tool's timeout
// (perTool, else def; zero means unbounded). When the time is up the
// handler's context is cancelled and the call ends at once with an error
// result saying so, even if the handler has not returned yet: a handler
// that ignores its context runs on in the background until it does, but
// the caller is no longer held.
func toolTimeoutMiddleware(def time.Duration, perTool map[string]time.Duration, hook limits.Hook, logger *slog.Logger) sdk.Middleware {
	if hook == nil {
		hook = func(context.Context, limits.Event) {}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			r, ok := req.(*sdk.CallToolRequest)
			if method != "tools/call" || !ok || r.Params == nil {
				return next(ctx, method, req)
			}
			name := r.Params.Name
			d, ok := perTool[name]
			if !ok {
				d = def
			}
			if d <= 0 {
				return next(ctx, method, req)
			}
			cctx, cancel := context.WithTimeoutCause(ctx, d, errToolTimeout)
			defer cancel()
			type outcome struct {
				res sdk.Result
				err error
			}
			done := make(chan outcome, 1) // buffered: a late handler never blocks
			go func() {
				res, err := next(cctx, method, req)
				done <- outcome{res, err}
			}()
			var o outcome
			select {
			case o = <-done:
			case <-cctx.Done():
			}
			// The tool may have returned because of the deadline: either way
			// the caller learns it timed out, not some context error.
			if ctx.Err() == nil && context.Cause(cctx) == errToolTimeout {
				hook(ctx, limits.Event{Limit: limits.LimitToolTimeout, Tool: name})
				logger.WarnContext(ctx, "tool call timed out", "tool", name, "timeout", d)
				return &sdk.CallToolResult{
					IsError: true,
					Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf(
						"The tool %q did not finish within %s and was cancelled. Try again later, or with a smaller request.", name, d)}},
				}, nil
			}
			if o.res == nil && o.err == nil {
				// The caller went away before the tool finished.
				return nil, ctx.Err()
			}
			return o.res, o.err
		}
	}
}

var errToolTimeout = errors.New("mcp: tool call timed out")

// sessionCap bounds the legacy sessions open at once. It learns a session's
// id from the initialize response and forgets it once the SDK no longer
// lists the session (closed by DELETE, the idle timeout, or a failed
// initialize).
type sessionCap struct {
	max    int
	server *sdk.Server

	mu      sync.Mutex
	ids     map[string]struct{}
	pending int // initializes admitted whose session id is not known yet
}

func newSessionCap(max int, server *sdk.Server) *sessionCap {
	return &sessionCap{max: max, server: server, ids: map[string]struct{}{}}
}

// acquire admits one initialize unless the cap is reached.
func (c *sessionCap) acquire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ids)+c.pending >= c.max {
		c.prune()
	}
	if len(c.ids)+c.pending >= c.max {
		return false
	}
	c.pending++
	return true
}

// release ends an admitted initialize; id is the session it created, or "".
func (c *sessionCap) release(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending--
	if id != "" {
		c.ids[id] = struct{}{}
	}
}

// open returns the number of sessions open (after forgetting closed ones).
func (c *sessionCap) open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prune()
	return len(c.ids)
}

// prune forgets sessions the server no longer has. c.mu must be held.
func (c *sessionCap) prune() {
	live := make(map[string]struct{}, len(c.ids))
	for ss := range c.server.Sessions() {
		if _, ok := c.ids[ss.ID()]; ok {
			live[ss.ID()] = struct{}{}
		}
	}
	c.ids = live
}

// serveInitialize serves a legacy initialize through the session cap:
// over the cap it is refused with 503, Retry-After and a JSON-RPC error.
func (h *Handler) serveInitialize(w http.ResponseWriter, r *http.Request) {
	if !h.sessions.acquire() {
		h.limitHook(r.Context(), limits.Event{Limit: limits.LimitSessions})
		h.logger.WarnContext(r.Context(), "session cap reached; initialize refused", "max_sessions", h.sessions.max)
		limits.WriteRefusal(w, http.StatusServiceUnavailable, 5*time.Second,
			fmt.Sprintf("Service unavailable: the server has %d sessions open, its limit. Retry later, or use the stateless 2026-07-28 protocol.", h.sessions.max))
		return
	}
	rec := &sessionIDRecorder{ResponseWriter: w}
	defer func() { h.sessions.release(rec.id) }()
	h.stateful.ServeHTTP(rec, r)
}

// sessionIDRecorder notes the Mcp-Session-Id the SDK sets on a response.
type sessionIDRecorder struct {
	http.ResponseWriter
	id string
}

func (s *sessionIDRecorder) WriteHeader(code int) {
	s.id = s.Header().Get(sessionIDHeader)
	s.ResponseWriter.WriteHeader(code)
}

func (s *sessionIDRecorder) Write(b []byte) (int, error) {
	if s.id == "" {
		s.id = s.Header().Get(sessionIDHeader)
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
