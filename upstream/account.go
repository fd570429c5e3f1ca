package upstream

// Connected accounts (oauth.grant authorization_code): each caller's
// sessions with the upstream carry the token of the account the caller
// connected at the upstream's own authorization server, which the
// Accounts hook gives. A caller who has not connected one is asked to,
// with a URL-mode elicitation where the client declared it can take one
// and a tool error naming the page where it cannot.

import (
	"context"
	"fmt"
	"net/http"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Accounts gives http upstreams with oauth.grant authorization_code each
// caller's connected account.
type Accounts interface {
	// Token returns the caller's access token for the upstream called
	// upstream, or a *[ConnectRequired] when the caller has no connected
	// account there. It is called before every request to the upstream,
	// so it answers from memory once it has the token.
	Token(ctx context.Context, ti *sdkauth.TokenInfo, upstream string) (string, error)
	// Rejected tells that the upstream refused token (HTTP 401): it is
	// refreshed before its next use, or the connection dropped.
	Rejected(ctx context.Context, ti *sdkauth.TokenInfo, upstream, token string)
}

// ConnectRequired is the answer for a caller who has not connected an
// account at an upstream: the page that connects it, valid for a few
// minutes and for this caller alone, and the id the client is told of
// when it is done (notifications/elicitation/complete).
type ConnectRequired struct {
	Upstream      string
	URL           string
	ElicitationID string
}

func (e *ConnectRequired) Error() string {
	return fmt.Sprintf("upstream: %s acts as the caller's own account there, which is not connected: %s", e.Upstream, e.URL)
}

// acceptsURLElicitation reports whether a caller with capabilities c
// declared URL-mode elicitation.
func acceptsURLElicitation(c *sdk.ClientCapabilities) bool {
	return c != nil && c.Elicitation != nil && c.Elicitation.URL != nil
}

// accountTransport sends each request with the caller's connected
// account's token; a 401 from the upstream is told to Accounts.
type accountTransport struct {
	accounts Accounts
	upstream string
	ti       *sdkauth.TokenInfo
	base     http.RoundTripper
}

func (t *accountTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, err := t.accounts.Token(r.Context(), t.ti, t.upstream)
	if err != nil {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := t.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		t.accounts.Rejected(r.Context(), t.ti, t.upstream, tok)
	}
	return resp, err
}
