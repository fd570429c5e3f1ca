package doctor

import (
	"context"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// token checks that the given token is accepted, so that the checks after
// it are about what they say and not about the token.
func (d *doctor) token(ctx context.Context) {
	switch {
	case d.blocked(CheckToken):
		return
	case !d.authOn:
		d.skip(CheckToken, "auth is off")
		return
	case d.opts.Token == "":
		d.skip(CheckToken, "no --token given")
		return
	}
	r, err := d.post(ctx, pingBody, true, nil)
	switch {
	case err != nil:
		d.fail(CheckToken, "POST ping with the token: %v", err)
		d.badToken = "the token check failed"
	case r.status == http.StatusOK:
		d.pass(CheckToken, "a ping with the token got 200")
	default:
		why := r.describe()
		if cs, err := oauthex.ParseWWWAuthenticate(r.header.Values("WWW-Authenticate")); err == nil && len(cs) > 0 && cs[0].Params["error"] != "" {
			why = fmt.Sprintf("%d %s: %s", r.status, cs[0].Params["error"], cs[0].Params["error_description"])
		}
		d.fail(CheckToken, "the token is refused: %s", why)
		d.badToken = "the token is refused"
	}
}
