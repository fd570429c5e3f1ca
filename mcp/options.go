package mcp

import (
	"errors"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configures the MCP server and its /mcp endpoint. It is the
// `mcp:` section of the configuration file; the zero value of each field
// is documented. What the server is wired to is [Deps].
type Options struct {
	// Sessions enables legacy (2024-11-05 … 2025-11-25) sessions: an
	// initialize request gets an Mcp-Session-Id, and requests carrying it
	// reach that session, which allows the GET stream, server→client
	// requests and stream resumption. With a shared session store (see
	// session_store) any replica serves every request of a session, with
	// no session affinity: its GET stream carries what any replica's copy
	// of the session sends, a client's answer to a server→client request
	// reaches the call waiting for it on whichever replica, and a stream
	// resumes on any replica. Requests without a session id are always
	// served statelessly. Unset means true.
	Sessions *bool `yaml:"sessions"`
	// SessionStore is where the record of each legacy session is kept:
	// "memory" (a session lives on the replica that made it; another
	// replica answers 404) or "redis" (shared by every replica, so that
	// any replica serves any request of a session, and DELETE and the idle
	// timeout hold on all of them; needs the redis section: one server,
	// Sentinel or Cluster). With redis, a call of a session costs Redis
	// nothing while its replica trusts its copy of the session: each
	// replica reads the session's record once per tenth of the idle
	// timeout, and writes a call's stream to Redis only when its client
	// lost it. Empty means redis when Redis is configured, else memory.
	SessionStore string `yaml:"session_store" schema:"enum=memory|redis"`
	// SessionIdleTimeout closes a legacy session that has seen no request
	// for this long (on any replica, with a shared session store). Zero
	// means 10 minutes.
	SessionIdleTimeout time.Duration `yaml:"session_idle_timeout"`
	// MaxBodyBytes bounds a request body; larger bodies get 413.
	// Zero means 4 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes" schema:"min=0"`
	// AllowedOrigins lists the browser origins (scheme://host[:port]) that may
	// call /mcp and get CORS answers: their preflights are answered and
	// their responses carry CORS headers. A page on an origin that is not
	// allowed is refused before its token is looked at.
	// When the list is empty, a page on a loopback origin (http or https,
	// localhost or a loopback IP, any port) may call a server listening on
	// a loopback address, and every other origin gets 403. Once the list
	// names any origin, those alone are allowed: a loopback page must be
	// listed too (http://localhost:6274 for the MCP Inspector), and any
	// other Origin gets 403. Requests without an Origin header
	// (non-browser clients) are unaffected.
	AllowedOrigins []string `yaml:"allowed_origins" schema:"origin"`
	// RequestState configures sealing of MRTR requestState.
	RequestState RequestStateOptions `yaml:"request_state"`
	// MaxSessions bounds the legacy sessions open at once; an initialize
	// over the cap gets 503 with Retry-After. Zero means 10000.
	MaxSessions int `yaml:"max_sessions" schema:"min=0"`
	// MaxSessionsPerPrincipal bounds the legacy sessions one caller (one
	// token issuer, subject and client) holds at once, initialized or not; its initialize over
	// the share gets 429 with Retry-After. Zero means a tenth of
	// MaxSessions (1000 by default), at least 1.
	MaxSessionsPerPrincipal int `yaml:"max_sessions_per_principal" schema:"min=0"`
	// ToolTimeout bounds one tools/call: when it is up the tool's context
	// is cancelled and the caller gets an error result saying so. Zero
	// means 60s.
	ToolTimeout time.Duration `yaml:"tool_timeout"`
	// ToolTimeouts overrides ToolTimeout for the tools listed.
	ToolTimeouts []ToolTimeout `yaml:"tool_timeouts"`
}

// RequestStateOptions configures how MRTR requestState is sealed.
type RequestStateOptions struct {
	// KeysFile holds one base64-encoded 32-byte key per line, newest first.
	// Every replica must read the same keys (mount one Secret). Empty means
	// a random key made at start, which only one process can open: fine for
	// development and a single replica, wrong for several.
	KeysFile string `yaml:"keys_file"`
	// TTL is how long a sealed state stays valid. Zero means 10 minutes.
	TTL time.Duration `yaml:"ttl"`
}

// Defaults fills in zero values.
func (o *Options) Defaults() {
	if o.Sessions == nil {
		t := true
		o.Sessions = &t
	}
	if o.SessionIdleTimeout == 0 {
		o.SessionIdleTimeout = 10 * time.Minute
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = sdk.DefaultMaxRequestBodyBytes
	}
	if o.RequestState.TTL == 0 {
		o.RequestState.TTL = 10 * time.Minute
	}
	if o.MaxSessions == 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxSessionsPerPrincipal == 0 {
		o.MaxSessionsPerPrincipal = max(o.MaxSessions/defaultSessionShare, 1)
	}
	if o.ToolTimeout == 0 {
		o.ToolTimeout = DefaultToolTimeout
	}
}

// Validate reports every problem with o, each prefixed with its key relative
// to the mcp section.
func (o *Options) Validate() error {
	var errs []error
	if o.SessionIdleTimeout < 0 {
		errs = append(errs, errors.New("session_idle_timeout: must not be negative"))
	}
	if o.SessionStore != "" && o.SessionStore != "memory" && o.SessionStore != "redis" {
		errs = append(errs, fmt.Errorf("session_store: %q is not memory or redis", o.SessionStore))
	}
	if o.MaxBodyBytes < 0 {
		errs = append(errs, errors.New("max_body_bytes: must not be negative"))
	}
	if o.RequestState.TTL < 0 {
		errs = append(errs, errors.New("request_state.ttl: must not be negative"))
	}
	errs = append(errs, o.validateLimits()...)
	for i, origin := range o.AllowedOrigins {
		if err := checkOrigin(origin); err != nil {
			errs = append(errs, fmt.Errorf("allowed_origins[%d]: %w", i, err))
		}
	}
	if o.RequestState.KeysFile != "" {
		if _, err := LoadKeys(o.RequestState.KeysFile); err != nil {
			errs = append(errs, fmt.Errorf("request_state.keys_file: %w", err))
		}
	}
	return errors.Join(errs...)
}

func checkOrigin(origin string) error {
	scheme, rest, ok := strings.Cut(origin, "://")
	if !ok || (scheme != "http" && scheme != "https") || rest == "" || strings.ContainsAny(rest, "/?#") {
		return fmt.Errorf("%q is not an origin (want scheme://host[:port], no path)", origin)
	}
	return nil
}

func (o *Options) validateLimits() []error {
	var errs []error
	if o.ToolTimeout < 0 {
		errs = append(errs, errors.New("tool_timeout: must not be negative"))
	}
	if o.MaxSessions < 0 {
		errs = append(errs, errors.New("max_sessions: must not be negative"))
	}
	if o.MaxSessionsPerPrincipal < 0 {
		errs = append(errs, errors.New("max_sessions_per_principal: must not be negative"))
	}
	if o.MaxSessions > 0 && o.MaxSessionsPerPrincipal > o.MaxSessions {
		errs = append(errs, fmt.Errorf("max_sessions_per_principal: %d is more than max_sessions %d", o.MaxSessionsPerPrincipal, o.MaxSessions))
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
