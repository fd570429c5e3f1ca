package doctor

import (
	"context"
	"net/http"
)

// origin checks that a browser request from an unlisted origin is refused.
func (d *doctor) origin(ctx context.Context) {
	if d.blocked(CheckOrigin) {
		return
	}
	r, err := d.post(ctx, pingBody, true, map[string]string{"Origin": d.opts.Origin})
	switch {
	case err != nil:
		d.fail(CheckOrigin, "POST with Origin %s: %v", d.opts.Origin, err)
	case r.status == http.StatusForbidden:
		d.pass(CheckOrigin, "Origin %s got 403", d.opts.Origin)
	case r.status == http.StatusUnauthorized && d.opts.Token == "":
		d.skip(CheckOrigin, "needs --token: the server asks for a token before it checks Origin")
	case r.status < 300:
		d.fail(CheckOrigin, "Origin %s got %s: any web page can make a browser call this server (list trusted origins in mcp.allowed_origins)", d.opts.Origin, r.describe())
	default:
		d.fail(CheckOrigin, "Origin %s got %s, want 403", d.opts.Origin, r.describe())
	}
}
