package upstream

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

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
	// KindConnect: the caller has no connected account at the upstream
	// (oauth.grant authorization_code) and was asked to connect one.
	KindConnect = "connect_required"
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
	// SubjectToken is the caller's token, from its token info, that an
	// http upstream with oauth.grant token_exchange, jwt_bearer or id_jag
	// presents for a token of its own: want is the type the grant prefers
	// ([TokenTypeIDToken] for id_jag, else [TokenTypeAccessToken]), typ
	// the type of the token returned, which may be another when the
	// caller has no token of that type (a caller signed in at the identity
	// provider directly has only its access token). Nothing else reads it,
	// and it is never logged or sent upstream. Nil means no caller has
	// one, and such upstreams refuse every call.
	SubjectToken func(ti *sdkauth.TokenInfo, want string) (token, typ string, ok bool)
	// Accounts gives an http upstream with oauth.grant authorization_code
	// each caller's connected account. Nil: such upstreams refuse every
	// call.
	Accounts Accounts
}

// DefaultBackoff doubles from 250ms per attempt up to 30s, with up to 20%
// jitter so that upstreams that fail together do not retry together.
func DefaultBackoff(attempt int) time.Duration {
	d := 250 * time.Millisecond << min(attempt, 7)
	d = min(d, 30*time.Second)
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

// Catalog is where a Manager puts what upstreams offer; *catalog.Catalog is one.
type Catalog interface {
	SetSource(name string, set catalog.Set) (skipped []string, err error)
	RemoveSource(name string)
	ResourceUpdated(ctx context.Context, uri string)
}
