package doctor

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Run checks the endpoint at o.URL and returns the report. It never returns
// early on a failure: every check is reported, run or skipped.
func Run(ctx context.Context, o Options) *Report {
	d := &doctor{opts: o, rep: &Report{URL: o.URL}}
	if d.opts.Origin == "" {
		d.opts.Origin = DefaultOrigin
	}
	if d.opts.Timeout <= 0 {
		d.opts.Timeout = 10 * time.Second
	}
	c := http.Client{Timeout: d.opts.Timeout}
	if o.HTTPClient != nil {
		c = *o.HTTPClient
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	d.client = &c

	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		d.fail(CheckURL, "%q is not an absolute http(s) URL (want e.g. https://mcp.example.com/mcp)", o.URL)
		return d.rep
	}
	d.url = u
	d.reachable(ctx)
	d.metadata(ctx)
	d.challenge()
	d.authServers(ctx)
	d.token(ctx)
	d.origin(ctx)
	d.mcpMethod(ctx)
	d.initialize(ctx)
	d.upstreams(ctx)
	return d.rep
}
