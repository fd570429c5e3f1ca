package doctor

import (
	"context"
	"net/http"
	"time"
)

// reachable sends an unauthenticated initialize, which tells whether the
// server answers, whether it speaks MCP, and whether auth is on.
func (d *doctor) reachable(ctx context.Context) {
	start := time.Now()
	r, err := d.post(ctx, initializeBody, false, nil)
	if err != nil {
		d.down = "server unreachable"
		d.fail(CheckReachable, "POST %s: %v", d.opts.URL, err)
		return
	}
	d.initResp = r
	elapsed := time.Since(start).Round(time.Millisecond)
	switch {
	case r.status == http.StatusUnauthorized:
		d.authOn = true
		d.pass(CheckReachable, "an initialize without a token got 401 in %s", elapsed)
	case r.status == http.StatusOK:
		if _, err := r.rpcResult("protocolVersion"); err != nil {
			d.notMCP = "not an MCP endpoint"
			d.fail(CheckReachable, "not an MCP endpoint: an initialize got 200 but %v", err)
			return
		}
		d.pass(CheckReachable, "an initialize without a token got 200 in %s", elapsed)
		if d.opts.AllowUnauthenticated {
			d.warn(CheckAuth, "auth is OFF: anyone who can reach the URL can call every tool (allowed by --allow-unauthenticated)")
		} else {
			d.fail(CheckAuth, "auth is OFF: an initialize without a token was served; anyone who can reach the URL can call every tool (pass --allow-unauthenticated if that is intended)")
		}
	default:
		d.notMCP = "not an MCP endpoint"
		d.fail(CheckReachable, "not an MCP endpoint: an initialize without a token got %s (want 401 with a Bearer challenge)", r.describe())
	}
}
