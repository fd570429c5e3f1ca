package mcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"

	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
	"github.com/portcullis-mcp/portcullis/internal/mcpmethod"
)

// Options configures the /mcp endpoint. It is the `mcp:` section of the
// configuration file; the zero value of each field is documented.
type Options struct {
	// Sessions enables legacy (2024-11-05 … 2025-11-25) sessions: an
	// initialize request gets an Mcp-Session-Id, and requests carrying it
	// reach that session, which allows the GET stream, server→client
	// requests and stream resumption. Sessions live in one replica's memory:
	// with several replicas, use session affinity on Mcp-Session-Id or a
	// client that re-initializes on 404. Requests without a session id are
	// always served statelessly. Nil means true.
	Sessions *bool `yaml:"sessions"`
	// SessionIdleTimeout closes a legacy session that has seen no request
	// for this long. Zero means 10 minutes.
	SessionIdleTimeout time.Duration `yaml:"session_idle_timeout"`
	// MaxBodyBytes bounds a request body; larger bodies get 413.
	// Zero means 4 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes" schema:"min=0"`
	// AllowedOrigins lists the browser origins (scheme://host[:port]) that may
	// call /mcp and get CORS answers: their preflights are answered and
	// their responses carry CORS headers. [Handler.OriginGuard] applies it. A request with an
	// Origin header that is not listed gets 403. Requests without an Origin
	// header (non-browser clients) are unaffected.
	AllowedOrigins []string `yaml:"allowed_origins" schema:"origin"`
	// RequestState configures sealing of MRTR requestState.
	RequestState RequestStateOptions `yaml:"request_state"`
	// MaxSessions bounds the legacy sessions open at once; an initialize
	// over the cap gets 503 with Retry-After. Zero means 10000.
	MaxSessions int `yaml:"max_sessions" schema:"min=0"`
	// MaxSessionsPerPrincipal bounds the legacy sessions one caller (see
	// PrincipalKey) holds at once, initialized or not; its initialize over
	// the share gets 429 with Retry-After. Zero means a tenth of
	// MaxSessions (1000 by default), at least 1.
	MaxSessionsPerPrincipal int `yaml:"max_sessions_per_principal" schema:"min=0"`
	// ToolTimeout bounds one tools/call: when it is up the tool's context
	// is cancelled and the caller gets an error result saying so. Zero
	// means 60s.
	ToolTimeout time.Duration `yaml:"tool_timeout"`
	// ToolTimeouts overrides ToolTimeout for the tools listed.
	ToolTimeouts []ToolTimeout `yaml:"tool_timeouts"`

	// LimitHook receives an event whenever a limit refuses a request (body
	// size, session cap). Nil means none. Not configurable from YAML.
	LimitHook limits.Hook `yaml:"-"`
	// PrincipalKey names the caller that MaxSessionsPerPrincipal counts
	// under; an empty key (no principal, as with auth off) is held to
	// MaxSessions only. Nil means no per-principal share. Not configurable
	// from YAML.
	PrincipalKey limits.KeyFunc `yaml:"-"`
}

// Access is how the endpoint enforces per-tool policy at the HTTP layer,
// before the SDK sees a request. A tools/call of a tool the caller may not
// see is answered as an unknown tool, exactly as a name that is not
// registered, never with a 403: that would confirm that the tool exists and
// name the scopes it needs. (The endpoint's own required scopes, which are
// public, still get the auth middleware's 403 insufficient_scope.)
type Access struct {
	// Policy decides per tool; nil allows everything, and then the SDK
	// middleware answers unknown tools.
	Policy ToolPolicy
	// Tools is the registry of tools (the catalog); required with a Policy,
	// when a call of a name it does not have is answered as an unknown tool.
	Tools Tools
	// OnDenied receives every tools/call the handler answers as an unknown
	// tool. Nil means none.
	OnDenied DenialHook
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

// RequestIDHeader is the request header in which the handler passes the
// JSON-RPC id of a single-request POST on to the SDK's middleware (which
// cannot otherwise see it), for telemetry. Any value a client sends under
// this name is removed first.
const RequestIDHeader = "Portcullis-Jsonrpc-Request-Id"

const (
	protocolVersionHeader = mcpheader.ProtocolVersion
	sessionIDHeader       = mcpheader.SessionID
	// statelessEra is the first protocol revision without an initialize
	// handshake; the SDK serves it only from a stateless handler.
	statelessEra = "2026-07-28"
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
	origins   []string
	maxBody   int64
	logger    *slog.Logger
	gate      *toolGate // nil without a policy
	sessions  *sessionCap
	limitHook limits.Hook

	mu       sync.Mutex
	draining bool
	streams  map[*context.CancelFunc]struct{}
}

// NewHandler returns the /mcp handler for server. opts must have had
// Defaults applied. access may be the zero value (no per-tool policy).
func NewHandler(server *sdk.Server, opts Options, access Access, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	get := func(*http.Request) *sdk.Server { return server }
	sdkLog := sdkLogger(logger)
	maxSessions := opts.MaxSessions
	if maxSessions <= 0 {
		maxSessions = DefaultMaxSessions
	}
	hook := opts.LimitHook
	if hook == nil {
		hook = func(context.Context, limits.Event) {}
	}
	h := &Handler{
		sessions:  newSessionCap(maxSessions, min(opts.MaxSessionsPerPrincipal, maxSessions), opts.PrincipalKey, server),
		limitHook: hook,
		origins:   opts.AllowedOrigins,
		maxBody:   opts.MaxBodyBytes,
		logger:    logger,
		streams:   make(map[*context.CancelFunc]struct{}),
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
	if access.Policy != nil {
		if access.Tools == nil {
			panic("mcp: NewHandler: Access.Policy is set without Access.Tools")
		}
		h.gate = newToolGate(access.Policy, access.Tools, access.OnDenied)
	}
	if opts.Sessions == nil || *opts.Sessions {
		h.stateful = sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{
			Logger:              sdkLog,
			MaxRequestBodyBytes: opts.MaxBodyBytes,
			SessionTimeout:      opts.SessionIdleTimeout,
			EventStore:          sdk.NewMemoryEventStore(nil),
		})
	}
	return h
}

// ServeHTTP implements [http.Handler].
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.cors(w, r) {
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.servePOST(w, r)
	case http.MethodGet, http.MethodDelete:
		if h.stateful == nil || r.Header.Get(protocolVersionHeader) >= statelessEra {
			w.Header().Set("Allow", "POST")
			http.Error(w, "Method Not Allowed: this endpoint keeps no sessions for this protocol version", http.StatusMethodNotAllowed)
			return
		}
		if r.Method == http.MethodGet {
			h.serveStream(w, r)
			return
		}
		h.stateful.ServeHTTP(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE, OPTIONS")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

// OriginGuard applies the Origin allow-list and CORS (see cors.go) before
// next runs: a browser request from an origin the endpoint does not allow
// gets 403, a preflight from one it allows gets its answer, and actual
// requests from it get the CORS response headers. Put in front of the auth
// middleware, it refuses a page on another origin (a DNS-rebinding attack)
// without looking at its token, answers preflights (which carry no token),
// and puts the CORS headers on auth's 401 and 403 too, so that a browser
// client can read their WWW-Authenticate. The handler applies it again
// itself, so it is safe alone.
func (h *Handler) OriginGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.cors(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// originAllowed reports whether a browser origin may call the endpoint: it
// is listed, or both it and the address the request arrived at are loopback
// (a local page talking to a local server; a DNS-rebinding page has a
// non-loopback origin).
func (h *Handler) originAllowed(r *http.Request, origin string) bool {
	if slices.Contains(h.origins, origin) {
		return true
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || !isLoopbackHost(local.String()) {
		return false
	}
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && isLoopbackHost(u.Host)
}

// isLoopbackHost reports whether hostport names a loopback IP or localhost.
func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func (h *Handler) servePOST(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			h.limitHook(r.Context(), limits.Event{Limit: limits.LimitBodySize})
			writeError(w, http.StatusRequestEntityTooLarge, nil, -32600,
				fmt.Sprintf("Request body exceeds %d bytes.", mbe.Limit))
			return
		}
		if errors.Is(err, limits.ErrBodyReadTimeout) {
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusRequestTimeout, nil, -32000, "Request Timeout: the request body did not arrive in time.")
			return
		}
		writeError(w, http.StatusBadRequest, nil, -32700, "Could not read the request body.")
		return
	}
	msgs, jerr := parseMessages(body)
	if jerr != nil {
		writeError(w, http.StatusBadRequest, jerr.id, jerr.code, jerr.msg)
		return
	}
	modern := isStatelessEra(r.Header, msgs)
	if !modern {
		// The SDK answers an unknown legacy method with a plain-text 400;
		// clients are owed a JSON-RPC error naming the method.
		for _, m := range msgs {
			if m.Method != "" && len(m.ID) > 0 && !mcpmethod.IsRequest(m.Method) {
				writeError(w, http.StatusBadRequest, m.ID, -32601, fmt.Sprintf("Method not found: %q.", m.Method))
				return
			}
		}
	}
	if h.gate != nil && !h.gateTools(w, r, msgs) {
		return
	}
	r.Body = &bodyReader{Reader: bytes.NewReader(body)}
	r.ContentLength = int64(len(body))
	r.Header.Del(RequestIDHeader)
	if len(msgs) == 1 && msgs[0].Method != "" && len(msgs[0].ID) > 0 {
		r.Header.Set(RequestIDHeader, idText(msgs[0].ID))
	}

	switch {
	case modern && onlyResponse(msgs):
		h.plain.ServeHTTP(w, r)
	case h.stateful == nil || modern:
		h.stateless.ServeHTTP(w, r)
	case r.Header.Get(sessionIDHeader) != "":
		h.stateful.ServeHTTP(w, r)
	case isInitialize(msgs):
		h.serveInitialize(w, r)
	default:
		h.stateless.ServeHTTP(w, r)
	}
}

// headerToolName returns the tool a tools/call names in its Mcp-Name
// header when the request is of revision 2026-07-28 or later, else "".
// The SDK checks the header against the body, and the registered tool's
// parameter headers against the request, before any middleware runs: so a
// name in the header that the caller does not see is answered before the
// SDK sees it.
func headerToolName(header http.Header) string {
	if header.Get(mcpheader.Method) != "tools/call" || header.Get(protocolVersionHeader) < statelessEra {
		return ""
	}
	return header.Get(mcpheader.Name)
}

// onlyResponse reports whether msgs, a POST of revision 2026-07-28 or
// later, is one request whose response stream can carry nothing but its
// response, so that a plain JSON body serves it as well as an event stream.
// In those revisions the server sends no requests of its own during a call
// (it returns an input-required result instead) and the notifications it
// may send with a call are progress, only for a request that carries a
// progressToken, and log messages, only for one that opts in with a log
// level; a request with either gets the event stream. So does
// subscriptions/listen, whose stream is its whole answer.
//
// A JSON body is written once, with its length; an event stream is flushed
// per message and then ended, each a write to the socket through every
// layer of response-writer wrapping. On the load harness the JSON body
// saves about a fifth of the server's CPU per call.
func onlyResponse(msgs []envelope) bool {
	if len(msgs) != 1 {
		return false
	}
	m := msgs[0]
	if m.Method == "" || len(m.ID) == 0 || m.Method == "subscriptions/listen" {
		return false
	}
	var p struct {
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
			LogLevel      json.RawMessage `json:"io.modelcontextprotocol/logLevel"`
		} `json:"_meta"`
	}
	if len(m.Params) > 0 && decode(m.Params, &p) != nil {
		return false // the SDK will refuse it, on an event stream as ever
	}
	return p.Meta.ProgressToken == nil && p.Meta.LogLevel == nil
}

// bodyReader is the body handed on to the SDK: the bytes already read.
type bodyReader struct{ *bytes.Reader }

// Close does nothing: the original body was read and closed by the server.
func (*bodyReader) Close() error { return nil }

// gateTools answers the request as a call of an unknown tool, and returns
// false, when a tool it names is one the caller does not see: the tool of
// any tools/call request in the body, or the Mcp-Name of a 2026-07-28
// tools/call. The answer depends on the name only, never on whether the
// tool exists, and comes after the checks that every request gets (body
// size, JSON syntax), so that nothing earlier tells the two apart.
// Notifications (no id) get no answer; the SDK middleware refuses them.
func (h *Handler) gateTools(w http.ResponseWriter, r *http.Request, msgs []envelope) bool {
	info := sdkauth.TokenInfoFromContext(r.Context())
	deny := func(id json.RawMessage, tool string) bool {
		jerr := h.gate.check(r.Context(), info, tool)
		if jerr == nil {
			return true
		}
		writeError(w, http.StatusOK, id, int(jerr.Code), jerr.Message)
		return false
	}
	if tool := headerToolName(r.Header); tool != "" && len(msgs) == 1 {
		// The SDK holds a single message to its headers (a body naming
		// another tool is refused alike whichever tools exist), so the
		// body need not be decoded again.
		return len(msgs[0].ID) == 0 || deny(msgs[0].ID, tool)
	}
	for _, m := range msgs {
		if m.Method != "tools/call" || len(m.ID) == 0 {
			continue
		}
		var p struct {
			Name string `json:"name"`
		}
		// A malformed params object is the SDK's to reject.
		if decode(m.Params, &p) != nil {
			continue
		}
		if !deny(m.ID, p.Name) {
			return false
		}
	}
	return true
}

// serveStream serves a standalone GET stream, which Drain can end.
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		http.Error(w, "Service Unavailable: draining", http.StatusServiceUnavailable)
		return
	}
	h.streams[&cancel] = struct{}{}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.streams, &cancel)
		h.mu.Unlock()
	}()
	h.stateful.ServeHTTP(w, r.WithContext(ctx))
}

// Drain ends every open GET stream and refuses new ones, so that an
// [http.Server.Shutdown] waits only for calls in flight. Clients reconnect to
// another replica.
func (h *Handler) Drain() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.draining = true
	for c := range h.streams {
		(*c)()
	}
}

// envelope is the part of a JSON-RPC message the router reads. Decoded by
// [decode], its fields point into the request body.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

type parseError struct {
	id   json.RawMessage
	code int
	msg  string
}

// decodeFlags decode JSON as the SDK does (field names match exactly, so
// that the router and the SDK read the same method and tool name from a
// body), and without copying: strings and raw values point into the input,
// which the router keeps unchanged for the SDK.
const decodeFlags = segjson.DontMatchCaseInsensitiveStructFields | segjson.ZeroCopy

// decode decodes the JSON value data into v, which then points into data.
// Bytes after the value are a syntax error.
func decode(data []byte, v any) error {
	rest, err := segjson.Parse(data, v, decodeFlags)
	if err == nil && len(rest) > 0 {
		err = &segjson.SyntaxError{}
	}
	return err
}

// parseMessages decodes a message or a batch far enough to route and check
// it, in one pass over the body: -32700 for a body that is not JSON, -32600
// for JSON that is not a JSON-RPC 2.0 request, notification or response.
func parseMessages(body []byte) ([]envelope, *parseError) {
	if tooDeep(body, maxDepth) {
		return nil, &parseError{code: -32700, msg: fmt.Sprintf("Parse error: the request body nests arrays and objects more than %d levels deep.", maxDepth)}
	}
	msgs, err := decodeMessages(body)
	if err != nil {
		var syntax *segjson.SyntaxError
		switch {
		case errors.As(err, &syntax) || !segjson.Valid(body):
			// A type error can come first in the body; the body is still
			// not JSON if it is invalid further on.
			return nil, &parseError{code: -32700, msg: "Parse error: the request body is not valid JSON."}
		case msgs == nil:
			return nil, &parseError{code: -32600, msg: "Invalid Request: a batch must be a non-empty array of JSON-RPC messages."}
		default:
			return nil, &parseError{code: -32600, msg: "Invalid Request: the body must be a JSON-RPC 2.0 message object."}
		}
	}
	for _, m := range msgs {
		switch {
		case m.JSONRPC != "2.0":
			return nil, &parseError{id: m.ID, code: -32600, msg: `Invalid Request: "jsonrpc" must be "2.0".`}
		case m.Method == "" && len(m.ID) > 0 && (len(m.Result) > 0 || len(m.Error) > 0):
			// A response to a server→client request.
		case m.Method == "":
			return nil, &parseError{id: m.ID, code: -32600, msg: `Invalid Request: a request needs a "method".`}
		}
	}
	return msgs, nil
}

// maxDepth is how deeply a body may nest arrays and objects, as the SDK
// allows. The decoder recurses once per level without a limit of its own,
// so a deeper body (a 4 MiB one can nest two million levels) is refused
// before it is decoded, instead of overflowing the stack.
const maxDepth = 1000

// tooDeep reports whether the JSON text data nests arrays and objects more
// than max levels deep. It looks at bytes only, skipping strings; data
// need not be valid JSON.
func tooDeep(data []byte, max int) bool {
	depth := 0
	inString, escaped := false, false
	for _, c := range data {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > max {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}

// decodeMessages decodes body as one message or a batch. On an error, msgs
// is nil for a batch and not nil for a single message.
func decodeMessages(body []byte) (msgs []envelope, err error) {
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []envelope
		if err := decode(body, &batch); err != nil || len(batch) == 0 {
			return nil, cmp.Or(err, errEmptyBatch)
		}
		return batch, nil
	}
	msgs = make([]envelope, 1)
	return msgs, decode(body, &msgs[0])
}

var errEmptyBatch = errors.New("empty batch")

// isStatelessEra reports whether a request uses protocol 2026-07-28 or later,
// by its header or, when a client sends none, by the per-request _meta.
func isStatelessEra(header http.Header, msgs []envelope) bool {
	if v := header.Get(protocolVersionHeader); v != "" {
		return v >= statelessEra
	}
	for _, m := range msgs {
		if !bytes.Contains(m.Params, []byte(sdk.MetaKeyProtocolVersion)) {
			continue
		}
		var p struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		var v string
		if decode(m.Params, &p) == nil && decode(p.Meta[sdk.MetaKeyProtocolVersion], &v) == nil && v >= statelessEra {
			return true
		}
	}
	return false
}

// idText is a JSON-RPC id as text: a string id unquoted, a number as
// written. A string with control characters stays quoted.
func idText(id json.RawMessage) string {
	if len(id) == 0 || id[0] != '"' {
		return string(id)
	}
	var s string
	if segjson.Unmarshal(id, &s) == nil && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return s
	}
	return string(id)
}

func isInitialize(msgs []envelope) bool {
	for _, m := range msgs {
		if m.Method == "initialize" {
			return true
		}
	}
	return false
}

// writeError writes a JSON-RPC error response for a failure found before
// the SDK sees the message. id is the request's id, or nil when unknown.
func writeError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	recordRefusal(w, code)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   any             `json:"error"`
	}{"2.0", id, map[string]any{"code": code, "message": msg}})
}
