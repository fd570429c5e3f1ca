//go:build e2e

package e2e

// MCP Apps behind Portcullis (docs/apps.md), tried as a user would: the
// published ext-apps example servers (pinned by
// scripts/install-node-tools.sh; one over Streamable HTTP, one over stdio)
// behind the real binary with auth on, and a host of our own in headless
// Chromium (e2e/apphost) that shows their Apps through the extension's
// AppBridge. The Apps call their servers' tools by their servers' names,
// through the host, and show what comes back.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// appEras are the protocol eras the host speaks with Portcullis: the SDK
// client's default (the 2025 era's initialize) and 2026-07-28.
var appEras = []string{"", "2026-07-28"}

func eraName(era string) string { return cmpOr(era, "2025-11-25") }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// appsDeployment is Portcullis with App servers behind it, auth on, and
// a token for each of its endpoints.
type appsDeployment struct {
	srv   *server
	idp   *IdP
	paths map[string]string // endpoint name → path ("root" is /mcp)
	token map[string]string
	res   map[string]string
}

func (d *appsDeployment) url(name string) string { return d.srv.BaseURL + d.paths[name] }

// startApps starts the IdP and Portcullis with upstreams and servers
// (the servers: entries, each with a name and a path), gets a token for
// every endpoint, and waits until /mcp lists want.
func startApps(t *testing.T, upstreams []map[string]any, servers []map[string]any, policy []map[string]any, want ...string) *appsDeployment {
	t.Helper()
	idp := startIdP(t)
	addr := freeLoopbackAddr(t)
	d := &appsDeployment{idp: idp, paths: map[string]string{"root": "/mcp"}, token: map[string]string{}, res: map[string]string{}}
	for _, s := range servers {
		d.paths[s["name"].(string)] = s["path"].(string)
	}
	for name, path := range d.paths {
		d.res[name] = "http://" + addr + path
	}
	authCfg := map[string]any{"resource": d.res["root"], "issuers": []map[string]any{{"issuer": idp.Issuer()}}}
	if policy != nil {
		authCfg["policy"] = policy
	}
	// The attacks make many calls in a row.
	limits := map[string]any{"rate_per_principal": 1000, "burst_per_principal": 1000}
	cfg := map[string]any{"auth": authCfg, "upstreams": upstreams, "servers": servers, "limits": limits}
	d.srv = startServer(t, nil, "--config", writeConfigFile(t, cfg), "--listen", addr)
	for name, res := range d.res {
		d.token[name] = idp.ClientCredentialsToken(t, idpClient, idpClientSecret, res)
	}
	awaitReady(t, d.srv, 90*time.Second)
	pollUntil(t, 60*time.Second, func() string {
		got, err := d.listNames("root")
		if err != nil {
			return err.Error()
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				return fmt.Sprintf("/mcp does not list %s yet: %v", w, got)
			}
		}
		return ""
	})
	return d
}

// listNames lists the tools of the endpoint name, on 2026-07-28.
func (d *appsDeployment) listNames(name string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, body, err := doPost(ctx, http.DefaultClient, d.url(name), string(modernRequest(1, "tools/list", nil)), modernHeaders(d.token[name], "tools/list", ""))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("tools/list at %s: status %d: %s", name, resp.StatusCode, body)
	}
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	msgs, err := parseRPCMessages(resp.Header.Get("Content-Type"), body)
	if err != nil || len(msgs) == 0 {
		return nil, fmt.Errorf("tools/list at %s: %v: %s", name, err, body)
	}
	if err := json.Unmarshal(msgs[len(msgs)-1].Result, &res); err != nil {
		return nil, err
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names, nil
}

// isoTime matches the time the basic App shows: an ISO 8601 instant.
var isoTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$`)

// checkBasicApp shows the basic App (server-basic-vanillajs) of tool at
// the endpoint, clicks its "Get Server Time" and checks that its own call,
// get-time by its server's name, came back and shows.
func checkBasicApp(t *testing.T, d *appsDeployment, host appHost, tab context.Context, endpoint, era, tool string) {
	t.Helper()
	opened := openApp(t, tab, appOpen{MCPURL: d.url(endpoint), Token: d.token[endpoint], Protocol: era, Tool: tool, Arguments: map[string]any{}, SandboxURL: host.SandboxURL})
	if want := cmpOr(era, "2025-11-25"); opened.ProtocolVersion != want {
		t.Errorf("the host speaks %q with %s, want %s", opened.ProtocolVersion, endpoint, want)
	}
	if opened.Result.IsError || !isoTime.MatchString(opened.Result.Text) || opened.HTMLBytes < 10_000 {
		t.Fatalf("showing %s: %+v", tool, opened)
	}
	frame := appFrame(t, tab, "#get-time-btn")
	// The model's result, given to the App by the host.
	frameText(t, frame, "#server-time", "the tool's result", func(s string) bool { return s == opened.Result.Text })
	clickIn(t, frame, "#get-time-btn")
	var own appRequest
	pollUntil(t, 30*time.Second, func() string {
		for _, r := range appLog(t, tab) {
			if r.Method == "tools/call" && (r.Result != nil || r.Error != nil) {
				own = r
				return ""
			}
		}
		return "the App made no call yet"
	})
	if own.Name != "get-time" || own.Error != nil || own.Result.IsError || !isoTime.MatchString(own.Result.Text) {
		t.Fatalf("the App's own call: %+v %+v %+v, want get-time by its server's name, answered", own, own.Result, own.Error)
	}
	frameText(t, frame, "#server-time", "the App's own call's result", func(s string) bool { return s == own.Result.Text })
}

// checkMonitorApp shows the system monitor's App (server-system-monitor)
// of tool at the endpoint: given the model's result, it polls its
// app-only tool poll-system-stats by its server's name and shows the
// memory in use.
func checkMonitorApp(t *testing.T, d *appsDeployment, host appHost, tab context.Context, endpoint, era, tool string) {
	t.Helper()
	opened := openApp(t, tab, appOpen{MCPURL: d.url(endpoint), Token: d.token[endpoint], Protocol: era, Tool: tool, Arguments: map[string]any{}, SandboxURL: host.SandboxURL})
	if opened.Result.IsError || !strings.Contains(opened.Result.Text, "hostname") {
		t.Fatalf("showing %s: %+v", tool, opened)
	}
	frame := appFrame(t, tab, "#memory-percent")
	frameText(t, frame, "#memory-percent", "the App's own polls", func(s string) bool { return regexp.MustCompile(`^\d+%$`).MatchString(s) })
	var polls []appRequest
	for _, r := range appLog(t, tab) {
		if r.Method == "tools/call" && (r.Result != nil || r.Error != nil) {
			polls = append(polls, r)
		}
	}
	if len(polls) == 0 {
		t.Fatal("the App shows stats but made no call")
	}
	for _, p := range polls {
		if p.Name != "poll-system-stats" || p.Error != nil || p.Result.IsError {
			t.Errorf("the App's own call: %+v %+v %+v, want poll-system-stats by its server's name, answered", p, p.Result, p.Error)
		}
	}
	// The app-only tool is listed, with its _meta, for the host to keep
	// from the model.
	tools, err := chromedp.Run(tab, chromedp.Evaluate[[]struct {
		Name string         `json:"name"`
		Meta map[string]any `json:"_meta"`
	}](`window.appHost.tools`))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tl := range tools {
		if strings.HasSuffix(tl.Name, "poll-system-stats") {
			found = true
			ui, _ := tl.Meta["ui"].(map[string]any)
			if vis, _ := ui["visibility"].([]any); len(vis) != 1 || vis[0] != "app" {
				t.Errorf("%s's _meta = %v, want ui.visibility [app]", tl.Name, tl.Meta)
			}
		}
	}
	if !found {
		t.Errorf("the app-only tool is not listed at %s", endpoint)
	}
}

// TestAppsBehindPortcullis shows the Apps of two published App servers,
// one over Streamable HTTP and one over stdio, with the default prefixes
// and a bearer token: through /mcp and through a virtual server each,
// on both protocol eras. Each App initializes, calls its own server's
// tools by their names (the monitor's an app-only tool), and shows the
// results.
func TestAppsBehindPortcullis(t *testing.T) {
	basicURL := startAppServerHTTP(t, "server-basic-vanillajs")
	d := startApps(t,
		[]map[string]any{
			{"name": "basic", "transport": "http", "url": basicURL, "required": true},
			appStdio(t, "monitor", "server-system-monitor"),
		},
		[]map[string]any{
			{"name": "clock", "path": "/mcp/clock", "tools": []map[string]any{{"source": "basic", "name": "get-time"}}},
			{"name": "stats", "path": "/mcp/stats", "tools": []map[string]any{{"source": "monitor", "name": "get-system-info", "expose_as": "system_info"}}},
		}, nil,
		"basic_get-time", "monitor_get-system-info", "monitor_poll-system-stats")
	host := startAppHost(t)
	browser := startChromium(t)
	for _, era := range appEras {
		t.Run(eraName(era), func(t *testing.T) {
			t.Run("basic at /mcp", func(t *testing.T) {
				checkBasicApp(t, d, host, host.appTab(t, browser), "root", era, "basic_get-time")
			})
			t.Run("basic at its virtual server", func(t *testing.T) {
				checkBasicApp(t, d, host, host.appTab(t, browser), "clock", era, "basic_get-time")
			})
			t.Run("monitor at /mcp", func(t *testing.T) {
				checkMonitorApp(t, d, host, host.appTab(t, browser), "root", era, "monitor_get-system-info")
			})
			t.Run("monitor at its virtual server", func(t *testing.T) {
				checkMonitorApp(t, d, host, host.appTab(t, browser), "stats", era, "system_info")
			})
		})
	}
	// The audit line names the tool as listed and the name the App used.
	pollUntil(t, 10*time.Second, func() string {
		for _, line := range strings.Split(d.srv.Stderr(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "tool call" && m["tool"] == "basic_get-time" && m["tool_called_as"] == "get-time" && m["outcome"] == "ok" {
				return ""
			}
		}
		return "no audit line of the App's call names both names"
	})
}

// appCallResult is the answer to one tools/call: the result's text, or
// the JSON-RPC error, and the HTTP status.
type appCallResult struct {
	Status  int
	Text    string
	IsError bool
	Code    int
	Message string
}

// callAs calls name with args at the endpoint with token, in era ("" for
// a 2025-11-25 request without a session).
func (d *appsDeployment) callAs(t *testing.T, endpoint, token, era, name string, args map[string]any) appCallResult {
	t.Helper()
	params := map[string]any{"name": name, "arguments": args}
	body, header := legacyRequest(7, "tools/call", params), withHeaders(bearer(token), "MCP-Protocol-Version", "2025-11-25")
	if era != "" {
		body, header = modernRequest(7, "tools/call", params), modernHeaders(token, "tools/call", name)
	}
	resp, b := postMCP(t, http.DefaultClient, d.url(endpoint), string(body), header)
	out := appCallResult{Status: resp.StatusCode}
	msgs, err := parseRPCMessages(resp.Header.Get("Content-Type"), b)
	if err != nil || len(msgs) == 0 {
		out.Message = string(b)
		return out
	}
	m := msgs[len(msgs)-1]
	if m.Error != nil {
		out.Code, out.Message = m.Error.Code, m.Error.Message
		return out
	}
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(m.Result, &res)
	out.IsError = res.IsError
	for _, c := range res.Content {
		out.Text += c.Text
	}
	return out
}

// call is callAs with the endpoint's own token.
func (d *appsDeployment) call(t *testing.T, endpoint, era, name string, args map[string]any) appCallResult {
	t.Helper()
	return d.callAs(t, endpoint, d.token[endpoint], era, name, args)
}

// read reads uri at the endpoint on 2026-07-28 and returns the text of
// its first content and that content's URI.
func (d *appsDeployment) read(t *testing.T, endpoint, uri string) (text, at string) {
	t.Helper()
	resp, b := postMCP(t, http.DefaultClient, d.url(endpoint), string(modernRequest(8, "resources/read", map[string]any{"uri": uri})), modernHeaders(d.token[endpoint], "resources/read", uri))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reading %s at %s: status %d: %s", uri, endpoint, resp.StatusCode, b)
	}
	var res struct {
		Contents []struct {
			URI  string `json:"uri"`
			Text string `json:"text"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(rpcResult(t, rpcMessages(t, resp.Header.Get("Content-Type"), b), "8"), &res); err != nil || len(res.Contents) == 0 {
		t.Fatalf("reading %s at %s: %v: %s", uri, endpoint, err, b)
	}
	return res.Contents[0].Text, res.Contents[0].URI
}

// readError reads uri at the endpoint on 2026-07-28 and returns the
// JSON-RPC error it is refused with; code 0 when it is not.
func (d *appsDeployment) readError(t *testing.T, endpoint, uri string) (code int, message string) {
	t.Helper()
	resp, b := postMCP(t, http.DefaultClient, d.url(endpoint), string(modernRequest(8, "resources/read", map[string]any{"uri": uri})), modernHeaders(d.token[endpoint], "resources/read", uri))
	msgs, err := parseRPCMessages(resp.Header.Get("Content-Type"), b)
	if err != nil || len(msgs) == 0 || msgs[len(msgs)-1].Error == nil {
		return 0, string(b)
	}
	return msgs[len(msgs)-1].Error.Code, msgs[len(msgs)-1].Error.Message
}

// resourceURIs lists the resources of the endpoint, on 2026-07-28.
func (d *appsDeployment) resourceURIs(t *testing.T, endpoint string) []string {
	t.Helper()
	resp, b := postMCP(t, http.DefaultClient, d.url(endpoint), string(modernRequest(9, "resources/list", nil)), modernHeaders(d.token[endpoint], "resources/list", ""))
	var res struct {
		Resources []struct {
			URI string `json:"uri"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(rpcResult(t, rpcMessages(t, resp.Header.Get("Content-Type"), b), "9"), &res); err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range res.Resources {
		uris = append(uris, r.URI)
	}
	slices.Sort(uris)
	return uris
}

// upstreamRequests is how many requests of method Portcullis sent the
// upstream up (the count of portcullis_upstream_request_duration_seconds).
func (d *appsDeployment) upstreamRequests(t *testing.T, up, method string) uint64 {
	t.Helper()
	resp, err := http.Get(d.srv.MetricsURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, m := range fams["portcullis_upstream_request_duration_seconds"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["upstream"] == up && labels["mcp_method_name"] == method {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// TestAppsTwoInstances puts two instances of one App server (one over
// Streamable HTTP, one over stdio) on /mcp: they serve one ui:// URI and
// one tool name. Each App's resource is served under its upstream's
// prefix and read from that upstream; the bare name and URI both offer
// are refused, naming both, to the model and to the App alike; a virtual
// server for each instance makes each App work, by either URI.
func TestAppsTwoInstances(t *testing.T) {
	basicURL := startAppServerHTTP(t, "server-basic-vanillajs")
	d := startApps(t,
		[]map[string]any{
			{"name": "one", "transport": "http", "url": basicURL, "required": true},
			appStdio(t, "two", "server-basic-vanillajs"),
		},
		[]map[string]any{
			{"name": "team-one", "path": "/mcp/team-one", "tools": []map[string]any{{"source": "one", "name": "get-time"}}},
			{"name": "team-two", "path": "/mcp/team-two", "tools": []map[string]any{{"source": "two", "name": "get-time"}}},
		}, nil,
		"one_get-time", "two_get-time")

	uris := d.resourceURIs(t, "root")
	if want := []string{"ui://one/get-time/mcp-app.html", "ui://two/get-time/mcp-app.html"}; !slices.Equal(uris, want) {
		t.Fatalf("/mcp lists resources %v, want %v", uris, want)
	}
	const own = "ui://get-time/mcp-app.html" // the App server's own URI
	for _, p := range []struct{ up, other string }{{"one", "two"}, {"two", "one"}} {
		uri := "ui://" + p.up + "/get-time/mcp-app.html"
		before, otherBefore := d.upstreamRequests(t, p.up, "resources/read"), d.upstreamRequests(t, p.other, "resources/read")
		html, at := d.read(t, "root", uri)
		if !strings.Contains(html, "<html") || at != uri {
			t.Errorf("reading %s: %d bytes at %s, want the App's HTML at the URI read", uri, len(html), at)
		}
		if got, other := d.upstreamRequests(t, p.up, "resources/read")-before, d.upstreamRequests(t, p.other, "resources/read")-otherBefore; got != 1 || other != 0 {
			t.Errorf("reading %s reached %s %v times and %s %v times, want its own upstream once", uri, p.up, got, p.other, other)
		}
		// Each virtual server serves its own instance's App alone, by
		// the URI it lists and by the App server's own.
		if got := d.resourceURIs(t, "team-"+p.up); !slices.Equal(got, []string{uri}) {
			t.Errorf("team-%s lists resources %v, want %s", p.up, got, uri)
		}
		before, otherBefore = d.upstreamRequests(t, p.up, "resources/read"), d.upstreamRequests(t, p.other, "resources/read")
		if html, at := d.read(t, "team-"+p.up, own); !strings.Contains(html, "<html") || at != own {
			t.Errorf("reading %s at team-%s: %d bytes at %s, want the App's HTML at the URI read", own, p.up, len(html), at)
		}
		if got, other := d.upstreamRequests(t, p.up, "resources/read")-before, d.upstreamRequests(t, p.other, "resources/read")-otherBefore; got != 1 || other != 0 {
			t.Errorf("reading %s at team-%s reached %s %v times and %s %v times, want its own upstream once", own, p.up, p.up, got, p.other, other)
		}
	}
	// The App server's own URI, which both serve, at /mcp: refused,
	// naming both.
	if code, msg := d.readError(t, "root", own); code != -32602 || !strings.Contains(msg, "Ambiguous") ||
		!strings.Contains(msg, `"ui://one/get-time/mcp-app.html", "ui://two/get-time/mcp-app.html"`) {
		t.Errorf("reading %s at /mcp: %d %s, want the ambiguity error naming both served URIs", own, code, msg)
	}
	for _, era := range appEras {
		r := d.call(t, "root", era, "get-time", map[string]any{})
		if r.Code != -32602 || !strings.Contains(r.Message, "Ambiguous") || !strings.Contains(r.Message, `"one_get-time", "two_get-time"`) {
			t.Errorf("%s: get-time at /mcp: %+v, want the ambiguity error naming one_get-time and two_get-time", eraName(era), r)
		}
	}

	host := startAppHost(t)
	browser := startChromium(t)
	t.Run("an App at /mcp", func(t *testing.T) {
		tab := host.appTab(t, browser)
		opened := openApp(t, tab, appOpen{MCPURL: d.url("root"), Token: d.token["root"], Tool: "one_get-time", Arguments: map[string]any{}, SandboxURL: host.SandboxURL})
		if opened.ResourceURI != "ui://one/get-time/mcp-app.html" {
			t.Errorf("one_get-time names %s", opened.ResourceURI)
		}
		frame := appFrame(t, tab, "#get-time-btn")
		clickIn(t, frame, "#get-time-btn")
		frameText(t, frame, "#server-time", "the App's refused call", func(s string) bool { return s == "[ERROR]" })
		log := appLog(t, tab)
		if len(log) != 1 || log[0].Name != "get-time" || log[0].Error == nil || !strings.Contains(log[0].Error.Message, "Ambiguous") {
			t.Errorf("the App's calls: %+v, want get-time refused as ambiguous", log)
		}
	})
	for _, up := range []string{"one", "two"} {
		for _, era := range appEras {
			t.Run(fmt.Sprintf("the App of %s at its virtual server, %s", up, eraName(era)), func(t *testing.T) {
				before, otherBefore := d.upstreamRequests(t, up, "tools/call"), d.upstreamRequests(t, map[string]string{"one": "two", "two": "one"}[up], "tools/call")
				checkBasicApp(t, d, host, host.appTab(t, browser), "team-"+up, era, up+"_get-time")
				// The model's call and the App's own: both to its instance.
				if got, other := d.upstreamRequests(t, up, "tools/call")-before, d.upstreamRequests(t, map[string]string{"one": "two", "two": "one"}[up], "tools/call")-otherBefore; got != 2 || other != 0 {
					t.Errorf("the calls reached %s %v times and the other instance %v times, want 2 and 0", up, got, other)
				}
			})
		}
	}
}

// TestConformanceWithApps runs both requirement sets of the conformance
// suite against an endpoint that also serves Apps: the conformance toolset
// beside the two published App servers on /mcp, and a virtual server
// exposing the toolset and an App. Serving Apps, and resolving their
// names, changes nothing the suite checks.
func TestConformanceWithApps(t *testing.T) {
	basicURL := startAppServerHTTP(t, "server-basic-vanillajs")
	all := map[string]any{"source": "conformance"}
	cfg := writeConfigFile(t, map[string]any{
		"tools": map[string]any{"toolsets": []string{"conformance"}},
		"upstreams": []map[string]any{
			{"name": "basic", "transport": "http", "url": basicURL, "required": true},
			appStdio(t, "monitor", "server-system-monitor"),
		},
		"servers": []any{map[string]any{
			"name": "conf-apps", "path": "/mcp/conf-apps",
			"tools":     []any{all, map[string]any{"source": "monitor", "name": "get-system-info"}},
			"resources": []any{all}, "prompts": []any{all},
		}},
	})
	srv := startServer(t, nil, "--config", cfg)
	awaitReady(t, srv, 90*time.Second)
	for _, s := range []struct{ name, path string }{{"root", "/mcp"}, {"conf-apps", "/mcp/conf-apps"}} {
		t.Run(s.name, func(t *testing.T) {
			conformanceRequirements(t, srv.BaseURL+s.path, func(format string, args ...any) {
				t.Helper()
				t.Logf(s.path+": "+format, args...)
			})
		})
	}
}
