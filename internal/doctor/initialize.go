package doctor

import (
	"context"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// initialize connects with the SDK client (2025-11-25, with a session, the
// way connectors speak today) and lists the tools.
func (d *doctor) initialize(ctx context.Context) {
	if d.blocked(CheckInitialize) || d.needsToken(CheckInitialize, "no token, no session") {
		last := d.rep.Checks[len(d.rep.Checks)-1]
		d.skip(CheckToolsList, "%s", last.Detail)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*d.opts.Timeout)
	defer cancel()
	hc := *d.client
	hc.Transport = bearer{token: d.opts.Token, next: transport(d.client)}
	client := sdk.NewClient(&sdk.Implementation{Name: "portcullis-doctor", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint: d.opts.URL, HTTPClient: &hc, MaxRetries: -1, DisableStandaloneSSE: true,
	}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		d.fail(CheckInitialize, "%v", err)
		d.skip(CheckToolsList, "initialize failed")
		return
	}
	defer cs.Close()
	res := cs.InitializeResult()
	session := "no session (mcp.sessions is off)"
	if cs.ID() != "" {
		session = "a session"
	}
	server := "unnamed server"
	if res.ServerInfo != nil {
		server = res.ServerInfo.Name + " " + res.ServerInfo.Version
	}
	d.pass(CheckInitialize, "protocol %s, %s, %s", res.ProtocolVersion, session, server)

	n := 0
	for _, err := range cs.Tools(ctx, nil) {
		if err != nil {
			d.fail(CheckToolsList, "%v", err)
			return
		}
		n++
	}
	if n == 0 {
		d.warn(CheckToolsList, "no tools: the token may lack the scopes the tool policy asks for")
		return
	}
	d.pass(CheckToolsList, "%s", plural(n, "tool"))
}

func transport(c *http.Client) http.RoundTripper {
	if c.Transport != nil {
		return c.Transport
	}
	return http.DefaultTransport
}

// bearer adds the token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
