// Package doctor checks a deployed Portcullis endpoint the way a Claude
// custom connector sees it: from the outside, over HTTP, given only the MCP
// URL (and, optionally, a bearer token).
//
// [Run] performs the checks in order and returns a [Report] with one [Check]
// per line. A check that cannot run because an earlier one failed is
// [Skip]ped with the reason; a check that found something a connector can
// live with but an operator should know is a [Warn]. The report fails when
// any check fails.
//
// The checks are written independently of the server's own code (the
// well-known URLs are derived here, not borrowed from package auth), so a
// mistake on the server side shows up instead of being agreed with.
package doctor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
)

// Status is the outcome of one [Check].
type Status string

// The outcomes of a check. Only [Fail] fails the report.
const (
	Pass Status = "PASS"
	Warn Status = "WARN"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
)

// Check is one line of a [Report].
type Check struct {
	// Name says what was checked, e.g. "challenge".
	Name string
	// Status is the outcome.
	Status Status
	// Detail says what was seen, and on failure why it is wrong.
	Detail string
}

// Report is the result of [Run].
type Report struct {
	// URL is the MCP endpoint that was checked.
	URL    string
	Checks []Check
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool {
	return slices.ContainsFunc(r.Checks, func(c Check) bool { return c.Status == Fail })
}

// Check returns the check named name, if the report has one.
func (r *Report) Check(name string) (Check, bool) {
	i := slices.IndexFunc(r.Checks, func(c Check) bool { return c.Name == name })
	if i < 0 {
		return Check{}, false
	}
	return r.Checks[i], true
}

// WriteText writes the report as aligned lines, one per check, and a
// summary line.
func (r *Report) WriteText(w io.Writer) error {
	width := 0
	for _, c := range r.Checks {
		width = max(width, len(c.Name))
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "portcullis doctor %s\n", r.URL)
	counts := map[Status]int{}
	for _, c := range r.Checks {
		counts[c.Status]++
		fmt.Fprintf(&b, "  %-4s  %-*s  %s\n", c.Status, width, c.Name, c.Detail)
	}
	fmt.Fprintf(&b, "%d passed, %d warnings, %d failed, %d skipped\n", counts[Pass], counts[Warn], counts[Fail], counts[Skip])
	_, err := w.Write(b.Bytes())
	return err
}

// Names of the checks, in the order Run performs them.
const (
	CheckURL          = "url"
	CheckReachable    = "reachable"
	CheckAuth         = "auth"
	CheckMetadata     = "resource metadata"
	CheckMetadataPath = "resource metadata (path)"
	CheckChallenge    = "challenge"
	CheckAuthServer   = "authorization server"
	CheckToken        = "token"
	CheckOrigin       = "origin refused"
	CheckMcpMethod    = "Mcp-Method checked"
	CheckInitialize   = "initialize"
	CheckToolsList    = "tools/list"
)

// DefaultOrigin is the unlisted browser Origin the origin check sends.
const DefaultOrigin = "https://evil.example"

// Options configures [Run].
type Options struct {
	// URL is the MCP endpoint, e.g. https://mcp.example.com/mcp: what a
	// connector is given.
	URL string
	// Token, when set, is sent as a bearer token for the checks that need
	// an authenticated caller (origin, Mcp-Method, initialize, tools/list).
	// It is never printed.
	Token string
	// Origin is the browser origin that must be refused. Empty means
	// [DefaultOrigin].
	Origin string
	// Timeout bounds each HTTP request. Zero means 10 seconds.
	Timeout time.Duration
	// AllowUnauthenticated turns "auth is off" from a failure into a warning,
	// for servers that are meant to be open (loopback development).
	AllowUnauthenticated bool
	// MetricsURL, when set, is the server's metrics listener
	// (http://HOST:9090/metrics); the upstreams check reads the state of
	// each upstream MCP server there. It is not public, so the check is
	// skipped without it.
	MetricsURL string
	// HTTPClient is used for every request; nil means a client with
	// Timeout. Redirects are never followed, so they are reported as seen.
	HTTPClient *http.Client
}

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

type doctor struct {
	opts   Options
	client *http.Client
	rep    *Report
	url    *url.URL

	down     string    // why the server cannot be checked at all, or ""
	notMCP   string    // why the endpoint is not MCP, or ""
	badToken string    // why the given token is refused, or ""
	authOn   bool      // an unauthenticated initialize got 401
	initResp *response // the unauthenticated initialize
	prm      *oauthex.ProtectedResourceMetadata
	prmURLs  []string // the metadata URLs that served a valid document
}

func (d *doctor) add(name string, s Status, format string, args ...any) {
	d.rep.Checks = append(d.rep.Checks, Check{Name: name, Status: s, Detail: fmt.Sprintf(format, args...)})
}

func (d *doctor) pass(name, format string, args ...any) { d.add(name, Pass, format, args...) }
func (d *doctor) warn(name, format string, args ...any) { d.add(name, Warn, format, args...) }
func (d *doctor) fail(name, format string, args ...any) { d.add(name, Fail, format, args...) }
func (d *doctor) skip(name, format string, args ...any) { d.add(name, Skip, format, args...) }

// blocked skips name when the endpoint is down or not MCP, and says so.
func (d *doctor) blocked(name string) bool {
	switch {
	case d.down != "":
		d.skip(name, "%s", d.down)
	case d.notMCP != "":
		d.skip(name, "%s", d.notMCP)
	case d.badToken != "":
		d.skip(name, "%s", d.badToken)
	default:
		return false
	}
	return true
}

// needsToken skips name when auth is on and no token was given.
func (d *doctor) needsToken(name, why string) bool {
	if d.authOn && d.opts.Token == "" {
		d.skip(name, "needs --token: %s", why)
		return true
	}
	return false
}

// JSON-RPC bodies the checks send.
const (
	initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"portcullis-doctor","version":"1"}}}`
	pingBody       = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	modernVersion  = "2026-07-28"
	modernList     = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"portcullis-doctor","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
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

// metadataURLs returns the RFC 9728 metadata URLs for the endpoint: the
// bare well-known URL and the one suffixed with the endpoint's path.
func (d *doctor) metadataURLs() (bare, suffixed string) {
	const wellKnown = "/.well-known/oauth-protected-resource"
	origin := d.url.Scheme + "://" + d.url.Host
	bare = origin + wellKnown
	suffixed = bare
	if p := strings.TrimSuffix(d.url.EscapedPath(), "/"); p != "" {
		suffixed = origin + wellKnown + p
	}
	return bare, suffixed
}

func (d *doctor) metadata(ctx context.Context) {
	bare, suffixed := d.metadataURLs()
	for _, m := range []struct{ name, url string }{{CheckMetadata, bare}, {CheckMetadataPath, suffixed}} {
		if d.down != "" {
			d.skip(m.name, "%s", d.down)
			continue
		}
		prm, err := d.fetchMetadata(ctx, m.url)
		switch {
		case err == nil:
			d.prmURLs = append(d.prmURLs, m.url)
			if d.prm == nil {
				d.prm = prm
			}
			d.pass(m.name, "%s names this resource and %s", m.url, plural(len(prm.AuthorizationServers), "authorization server"))
		case !d.authOn && d.notMCP == "" && errors.Is(err, errNotFound):
			d.skip(m.name, "auth is off: %s is not served", m.url)
		default:
			d.fail(m.name, "%s: %v", m.url, err)
		}
	}
}

var errNotFound = errors.New("404 Not Found")

func (d *doctor) fetchMetadata(ctx context.Context, u string) (*oauthex.ProtectedResourceMetadata, error) {
	r, err := d.get(ctx, u)
	if err != nil {
		return nil, err
	}
	if r.status == http.StatusNotFound {
		return nil, errNotFound
	}
	var prm oauthex.ProtectedResourceMetadata
	if err := r.decodeJSON(&prm); err != nil {
		return nil, err
	}
	switch {
	case prm.Resource != d.opts.URL:
		return nil, fmt.Errorf("resource is %q, want exactly %q (set auth.resource to the URL connectors use)", prm.Resource, d.opts.URL)
	case len(prm.AuthorizationServers) == 0:
		return nil, errors.New("authorization_servers is empty: a connector cannot tell where to get a token")
	}
	return &prm, nil
}

// challenge checks the WWW-Authenticate header of the unauthenticated
// initialize: a Bearer challenge naming the metadata and the scopes.
func (d *doctor) challenge() {
	if d.blocked(CheckChallenge) {
		return
	}
	if !d.authOn {
		d.skip(CheckChallenge, "auth is off: no challenge")
		return
	}
	cs, err := oauthex.ParseWWWAuthenticate(d.initResp.header.Values("WWW-Authenticate"))
	if err != nil {
		d.fail(CheckChallenge, "WWW-Authenticate does not parse: %v", err)
		return
	}
	i := slices.IndexFunc(cs, func(c oauthex.Challenge) bool { return c.Scheme == "bearer" })
	if i < 0 {
		d.fail(CheckChallenge, "the 401 has no WWW-Authenticate: Bearer challenge (got %q)", d.initResp.header.Values("WWW-Authenticate"))
		return
	}
	params := cs[i].Params
	rm := params["resource_metadata"]
	bare, suffixed := d.metadataURLs()
	switch {
	case rm == "":
		d.fail(CheckChallenge, "the Bearer challenge has no resource_metadata: a connector cannot discover the authorization server")
		return
	case rm != bare && rm != suffixed:
		d.fail(CheckChallenge, "resource_metadata is %q, want %q (or %q)", rm, suffixed, bare)
		return
	case !slices.Contains(d.prmURLs, rm):
		d.fail(CheckChallenge, "resource_metadata points at %s, which failed above", rm)
		return
	}
	scope := params["scope"]
	if scope == "" && d.prm != nil && len(d.prm.ScopesSupported) > 0 {
		d.warn(CheckChallenge, "resource_metadata=%q but no scope, while the metadata lists scopes_supported %v: clients then ask for all of them (set auth.required_scopes)", rm, d.prm.ScopesSupported)
		return
	}
	if scope == "" {
		d.pass(CheckChallenge, "401 Bearer resource_metadata=%q", rm)
		return
	}
	if d.prm != nil && len(d.prm.ScopesSupported) > 0 {
		var unlisted []string
		for _, sc := range strings.Fields(scope) {
			if !slices.Contains(d.prm.ScopesSupported, sc) {
				unlisted = append(unlisted, sc)
			}
		}
		if len(unlisted) > 0 {
			d.warn(CheckChallenge, "scope=%q names %q, which the metadata's scopes_supported %v does not list: clients ask the authorization server for the challenge's scopes, which it may not know (for Entra ID, list api://APP/scope in auth.scopes_supported)", scope, unlisted, d.prm.ScopesSupported)
			return
		}
	}
	d.pass(CheckChallenge, "401 Bearer resource_metadata=%q scope=%q", rm, scope)
}

// authServers fetches each authorization server's metadata the way the MCP
// authorization spec tells clients to: RFC 8414, then OpenID Connect
// discovery, with path insertion for issuers that have a path.
func (d *doctor) authServers(ctx context.Context) {
	switch {
	case d.down != "":
		d.skip(CheckAuthServer, "%s", d.down)
		return
	case d.prm == nil && !d.authOn && d.notMCP == "":
		d.skip(CheckAuthServer, "auth is off")
		return
	case d.prm == nil:
		d.skip(CheckAuthServer, "no valid resource metadata names one")
		return
	}
	for _, issuer := range d.prm.AuthorizationServers {
		d.authServer(ctx, issuer)
	}
}

// authServerMeta is the part of RFC 8414 / OIDC discovery metadata doctor
// reads.
type authServerMeta struct {
	Issuer                        string   `json:"issuer"`
	AuthorizationEndpoint         string   `json:"authorization_endpoint"`
	TokenEndpoint                 string   `json:"token_endpoint"`
	CodeChallengeMethodsSupported []string `json:"code_challenge_methods_supported"`
}

func (d *doctor) authServer(ctx context.Context, issuer string) {
	u, err := url.Parse(issuer)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		d.fail(CheckAuthServer, "%q is not an absolute http(s) URL", issuer)
		return
	}
	origin := u.Scheme + "://" + u.Host
	p := strings.Trim(u.EscapedPath(), "/")
	candidates := []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}
	if p != "" {
		candidates = []string{
			origin + "/.well-known/oauth-authorization-server/" + p,
			origin + "/.well-known/openid-configuration/" + p,
			origin + "/" + p + "/.well-known/openid-configuration",
		}
	}
	for _, c := range candidates {
		r, err := d.get(ctx, c)
		if err != nil {
			d.fail(CheckAuthServer, "%s: %v", issuer, err)
			return
		}
		if r.status >= 400 && r.status < 500 {
			continue
		}
		var m authServerMeta
		if err := r.decodeJSON(&m); err != nil {
			d.fail(CheckAuthServer, "%s: %v", c, err)
			return
		}
		if strings.TrimSuffix(m.Issuer, "/") != strings.TrimSuffix(issuer, "/") {
			d.fail(CheckAuthServer, "%s names issuer %q, want %q: clients refuse metadata of another issuer", c, m.Issuer, issuer)
			return
		}
		if m.AuthorizationEndpoint == "" || !slices.Contains(m.CodeChallengeMethodsSupported, "S256") {
			d.warn(CheckAuthServer, "%s: issuer matches, but no authorization_endpoint with PKCE S256: a Claude connector cannot sign users in here", c)
			return
		}
		d.pass(CheckAuthServer, "%s: issuer matches, authorization code with PKCE S256", c)
		return
	}
	d.fail(CheckAuthServer, "%s: no metadata at any of %s", issuer, strings.Join(candidates, ", "))
}

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

// mcpMethod checks that a 2026-07-28 request whose Mcp-Method header does
// not match its body is refused (the SDK answers 400, code -32020), after a
// matching request is accepted, so the 400 is known to be about the header.
func (d *doctor) mcpMethod(ctx context.Context) {
	if d.blocked(CheckMcpMethod) || d.needsToken(CheckMcpMethod, "/mcp asks for a token before it reads headers") {
		return
	}
	hdr := map[string]string{mcpheader.ProtocolVersion: modernVersion, mcpheader.Method: "tools/list"}
	r, err := d.post(ctx, modernList, true, hdr)
	if err != nil {
		d.fail(CheckMcpMethod, "2026-07-28 tools/list: %v", err)
		return
	}
	if r.status != http.StatusOK {
		d.fail(CheckMcpMethod, "a well-formed 2026-07-28 tools/list got %s, want 200", r.describe())
		return
	}
	hdr[mcpheader.Method] = "ping"
	r, err = d.post(ctx, modernList, true, hdr)
	switch {
	case err != nil:
		d.fail(CheckMcpMethod, "2026-07-28 tools/list with Mcp-Method ping: %v", err)
	case r.status == http.StatusBadRequest:
		d.pass(CheckMcpMethod, "Mcp-Method ping on a tools/list body got 400%s", r.rpcError())
	default:
		d.fail(CheckMcpMethod, "Mcp-Method ping on a tools/list body got %s, want 400: a proxy between client and server may rewrite or drop Mcp-* headers", r.describe())
	}
}

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

// response is an HTTP response with its body read (bounded).
type response struct {
	status int
	header http.Header
	body   []byte
}

const maxBody = 1 << 20

func (d *doctor) do(req *http.Request) (*response, error) {
	resp, err := d.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is already in the detail
		}
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("reading the response: %w", err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

func (d *doctor) get(ctx context.Context, u string) (*response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	return d.do(req)
}

// post sends body to the endpoint as a Streamable HTTP client does, with
// the token when withToken is set and one was given.
func (d *doctor) post(ctx context.Context, body string, withToken bool, header map[string]string) (*response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.opts.URL, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if withToken && d.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+d.opts.Token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return d.do(req)
}

func (r *response) mediaType() string {
	mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type"))
	return mt
}

// describe summarises the response for a failure line.
func (r *response) describe() string {
	s := fmt.Sprintf("%d %s", r.status, http.StatusText(r.status))
	if loc := r.header.Get("Location"); loc != "" {
		return s + " redirecting to " + loc
	}
	if mt := r.mediaType(); mt != "" {
		s += " (" + mt + ")"
	}
	if e := r.rpcError(); e != "" {
		return s + e
	}
	if snippet := strings.Join(strings.Fields(string(r.body)), " "); snippet != "" {
		if len(snippet) > 80 {
			snippet = snippet[:80] + "…"
		}
		s += ": " + snippet
	}
	return s
}

func (r *response) decodeJSON(v any) error {
	if r.status != http.StatusOK {
		return fmt.Errorf("got %s, want 200 with JSON", r.describe())
	}
	if mt := r.mediaType(); mt != "application/json" {
		return fmt.Errorf("Content-Type is %q, want application/json", mt)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	return nil
}

// rpcMessage returns the last JSON-RPC message of a JSON or SSE body.
func (r *response) rpcMessage() (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	switch r.mediaType() {
	case "application/json":
		if err := json.Unmarshal(r.body, &m); err != nil {
			return nil, fmt.Errorf("the body is not a JSON-RPC message: %v", err)
		}
	case "text/event-stream":
		sc := bufio.NewScanner(bytes.NewReader(r.body))
		sc.Buffer(nil, maxBody)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				var mm map[string]json.RawMessage
				if json.Unmarshal([]byte(strings.TrimSpace(data)), &mm) == nil {
					m = mm
				}
			}
		}
		if m == nil {
			return nil, errors.New("the event stream carries no JSON-RPC message")
		}
	default:
		return nil, fmt.Errorf("Content-Type is %q, want application/json or text/event-stream", r.mediaType())
	}
	return m, nil
}

// rpcResult returns the result of a JSON-RPC response, which must hold
// field.
func (r *response) rpcResult(field string) (map[string]json.RawMessage, error) {
	m, err := r.rpcMessage()
	if err != nil {
		return nil, err
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(m["result"], &res) != nil || res[field] == nil {
		return nil, fmt.Errorf("the response has no result.%s", field)
	}
	return res, nil
}

// rpcError returns ` (JSON-RPC error CODE: MESSAGE)` when the body is a
// JSON-RPC error, else "".
func (r *response) rpcError() string {
	m, err := r.rpcMessage()
	if err != nil {
		return ""
	}
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(m["error"], &e) != nil || e.Code == 0 {
		return ""
	}
	return fmt.Sprintf(" (JSON-RPC error %d: %s)", e.Code, e.Message)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
