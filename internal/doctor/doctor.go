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
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
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

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
