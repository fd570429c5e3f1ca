package httptools

import (
	"log/slog"
	"net/http"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/portcullis-mcp/portcullis/upstream"
)

// Deps are what the APIs need from the process. Every field may be nil.
type Deps struct {
	// Logger receives the APIs' warnings. Nil discards.
	Logger *slog.Logger
	// Transport wraps each API's transport, below its credential (the
	// tracing transport).
	Transport func(http.RoundTripper) http.RoundTripper
	// SubjectToken is the caller's token, from its token info, that an
	// API whose token is got for each caller (oauth.grant token_exchange,
	// jwt_bearer, id_jag) presents at the token endpoint, of the type want
	// if it can ([upstream.TokenTypeAccessToken] or
	// [upstream.TokenTypeIDToken]); ok false when there is none. It is
	// sent only to the token endpoint, never to the API.
	SubjectToken func(ti *sdkauth.TokenInfo, want string) (token, typ string, ok bool)
	// PrincipalKey names the caller a token info describes, for the
	// tokens got for each caller; "" for none.
	PrincipalKey func(ti *sdkauth.TokenInfo) string
	// Accounts gives APIs with oauth.grant authorization_code each
	// caller's connected account.
	Accounts upstream.Accounts
}
