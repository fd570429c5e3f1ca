package portcullis

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/template"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/callgrind"
	"github.com/portcullis-mcp/portcullis/internal/oidctest"
	"github.com/portcullis-mcp/portcullis/internal/redistest"
)

// The call budget (issue 44): what one call costs the server on each path
// a user pays for, in numbers that the machine's speed does not move, held
// to the budgets of testdata/budgets.txt.
//
// TestCallBudget starts this test binary once per path as the server,
// under valgrind's callgrind, serving `serve --config` with the path's
// configuration exactly as the binary does (TestCallBudgetChild), and is
// its client over loopback HTTP from outside valgrind: a warm-up, then
// budgetCalls checked calls that the child brackets with callgrind's client
// requests (internal/callgrind). Per call it reads
//
//   - the instructions the server process executed, on every goroutine
//     (the HTTP server, auth, limits, telemetry, the MCP handler, the SDK,
//     the tool; the spans of those calls exported to a sink: the child
//     flushes them before and after), garbage collection excepted: the
//     child collects before the window, and no collection runs in it (the
//     heap floor, runtime.go), so the count does not depend on when one
//     happens to start. What the garbage costs is held by the next two;
//   - the heap allocations, and the bytes allocated (runtime.MemStats).
//
// Instructions under callgrind are nearly deterministic for one binary
// and one sequence of requests: two runs differ by what the scheduler and
// the network did differently (a read that found its data or waited),
// and by what the server does by the clock in a window that a busy
// machine makes longer; within the margins below at the load the budgets
// were measured at (testdata/budgets.txt says how much more the paths on
// a legacy session count under heavier load). A path's
// measurement fails when it exceeds its budget by more than the margin;
// a measurement well below its budget is reported, so that the budget is
// lowered with the change that earned it. Raising one is a reviewed change
// of testdata/budgets.txt, its reason column saying why.
//
// It runs under `make budget` (part of make test), on the shipped build
// (the patched SDK) without the race detector, and is skipped otherwise:
//
//	CALL_BUDGET=1 CGO_ENABLED=0 go test -modfile .cache/sdk-patched/go.mod -trimpath -tags grpcnotrace -run '^TestCallBudget$' -v .
//
// CALL_BUDGET_KEEP=DIR keeps each path's callgrind dump there, for
// callgrind_annotate (on a test binary built with go test -c: go test
// strips the names); CALL_BUDGET_ONLY=a,b measures those paths alone
// (planted-regression: builtin with the regression planted);
// CALL_BUDGET_SERVE_ENV='KEY=VALUE;…' serves them with those variables.

// Margins over a budget before a measurement fails, as fractions.
const (
	budgetInstrMargin  = 0.03
	budgetAllocsMargin = 0.02
	budgetBytesMargin  = 0.05
	// budgetSlack is how far below its budget a measurement may fall
	// before the test says to lower the budget.
	budgetSlack = 0.05
)

// budgetWarmup and budgetCalls are the calls before the measured window
// (uninstrumented: caches, pools and connections warm) and in it: few,
// as under a busy machine's load each call waits for both processes to be
// scheduled. Two runs of a window at one load agree within 3 % (most
// paths within 1.5 %); its fixed costs (the span export that ends it) add
// about 2 % to each call, which the budgets include.
const (
	budgetWarmup = 25
	budgetCalls  = 40
)

// budgetParallel is how many paths are measured at once: more than the
// cores of a small machine, as each server waits on its client (another
// process) for part of each call.
const budgetParallel = 3

// Environment variables of the test and its child process. They do not
// start with PORTCULLIS_: the child's serve reads those as configuration.
const (
	budgetEnv      = "CALL_BUDGET"       // set: TestCallBudget runs
	budgetOnlyEnv  = "CALL_BUDGET_ONLY"  // comma-separated paths to measure
	budgetKeepEnv  = "CALL_BUDGET_KEEP"  // a directory for the callgrind dumps
	budgetChildEnv = "CALL_BUDGET_CHILD" // the child's directory (config, logs, dumps)
	// budgetServeEnv is KEY=VALUE;… added to the served configuration's
	// environment, to measure what a setting costs (e.g.
	// OTEL_TRACES_EXPORTER=none, PORTCULLIS_LOG_LEVEL=warn). The budgets
	// hold without it.
	budgetServeEnv = "CALL_BUDGET_SERVE_ENV"
)

// budgetPath is one path a user pays for: the configuration added to the
// base one (budgetBaseConfig) and the call made on it. Adding a path is
// one row of budgetPaths and one line of testdata/budgets.txt.
type budgetPath struct {
	name  string
	about string
	// config is appended to the base configuration, and policy to its
	// auth.policy entries; both are templates of budgetVars.
	config, policy string
	// redis: the path needs a redis-server (budgetVars.Redis).
	redis bool
	// mcpPath is the path called (default /mcp); tool the tool, which
	// answers with its argument text; legacy: a 2025-11-25 call on a
	// session, else a 2026-07-28 call.
	mcpPath, tool string
	legacy        bool
	// paramHeader, if set, is the header that carries the text argument
	// (a tool whose schema binds it with x-mcp-header).
	paramHeader string
	// authServer: the token comes from Portcullis's authorization server
	// (the ID-JAG grant of an enterprise IdP), not from the IdP directly.
	authServer bool
	// audited: the configuration writes audit events to AuditFile, and
	// the measurement checks that every call of its window was recorded.
	audited bool
}

// budgetPaths are the paths, each measured in its own server process.
var budgetPaths = []budgetPath{
	{
		name:  "builtin",
		about: "a 2026-07-28 tools/call of the built-in echo on /mcp",
		tool:  "echo",
	},
	{
		name:   "session-memory",
		about:  "a 2025-11-25 tools/call of echo on a session kept in memory",
		tool:   "echo",
		legacy: true,
	},
	{
		name:   "session-redis",
		about:  "a 2025-11-25 tools/call of echo on a session kept in Redis (rate buckets there too)",
		config: "redis:\n  url: redis://{{.Redis}}\n",
		redis:  true,
		tool:   "echo",
		legacy: true,
	},
	{
		name:  "virtual",
		about: "a 2026-07-28 tools/call on a virtual server that exposes echo renamed and described",
		config: `servers:
  - name: bench
    path: /mcp/bench
    title: Bench
    tools:
      - source: core
        name: echo
        expose_as: repeat
        title: Repeat
        description: Sends the text back as it came.
        arguments:
          text: {description: The text to send back.}
    auth:
      required_scopes: [mcp:tools]
      policy:
        - tool: repeat
          scopes: [mcp:echo]
`,
		mcpPath: "/mcp/bench",
		tool:    "repeat",
	},
	{
		name:    "proxied-hop",
		about:   "a 2026-07-28 tools/call of an HTTP upstream's echo, sent by the direct hop",
		config:  budgetUpstreamConfig,
		policy:  "    - tool: up_echo\n      scopes: [mcp:echo]\n",
		tool:    "up_echo",
		mcpPath: "/mcp",
	},
	{
		name:        "proxied-sdk-client",
		about:       "a 2026-07-28 tools/call of an HTTP upstream's tool with a header-bound argument, sent by the SDK client",
		config:      budgetUpstreamConfig,
		policy:      "    - tool: up_echo_bound\n      scopes: [mcp:echo]\n",
		tool:        "up_echo_bound",
		paramHeader: "Mcp-Param-Text",
	},
	{
		name:  "authserver-token",
		about: "a 2026-07-28 tools/call of echo with a token of Portcullis's authorization server",
		config: `authorization_server:
  enabled: true
  idp:
    issuer: https://idp.example.com
    client_id: portcullis
    client_secret_file: {{.SecretFile}}
  clients:
    - client_id: app
      redirect_uris: [http://127.0.0.1/callback]
  enterprise_idps:
    - issuer: {{.Issuer}}
      allow_http: true
`,
		tool:       "echo",
		authServer: true,
	},
	{
		name:    "policy-audit",
		about:   "a 2026-07-28 tools/call of echo through ten argument rules, its audit event written to a file",
		config:  "audit:\n  sinks:\n    - type: file\n      path: {{.AuditFile}}\n",
		policy:  budgetRules,
		tool:    "echo",
		audited: true,
	},
}

// budgetRules are ten argument rules on echo, added to its policy entry
// in the base configuration: the shapes of BenchmarkPolicyRules
// (comparisons, in, contains, size, has, the caller, the tool, the time)
// over the one argument echo takes, each of which holds for the calls
// budgetCaller makes.
const budgetRules = `      rules:
        - {name: r0, allow: 'args.text.startsWith("t")'}
        - {name: r1, allow: 'size(args.text) < 4096'}
        - {name: r2, allow: '!args.text.contains("DROP")'}
        - {name: r3, allow: 'args.text != ""'}
        - {name: r4, allow: '!has(args.note) || size(args.note) < 100'}
        - {name: r5, allow: 'args.text in ["t0", "x"] || size(args.text) > 1'}
        - {name: r6, allow: '"mcp:tools" in caller.scopes || args.text == "t0"'}
        - {name: r7, allow: 'caller.subject != "" || args.text == ""'}
        - {name: r8, allow: 'tool.server == "" || args.text != "divide"'}
        - {name: r9, allow: 'now.getHours() >= 0 && size(args.text) > 0'}
`

// budgetUpstreamConfig is the upstream of the proxied paths: the
// go-sdk server the test serves (budgetUpstream), statelessly, as a
// 2026-07-28 upstream is.
const budgetUpstreamConfig = `upstreams:
  - name: up
    transport: http
    url: {{.Upstream}}
    prefix: up
`

// budgetVars are what the configuration templates may use.
type budgetVars struct {
	Addr, MetricsAddr, Issuer, Upstream, Redis, SecretFile, AuditFile string
	Policy, Extra                                                     string
}

// budgetBaseConfig is the full stack of the load harness's portcullis row
// (bench/loadtest): JWT auth against an IdP (keys by discovery), a
// required scope and a per-tool policy, the request limits set above what
// one client reaches, metrics, spans exported over OTLP/HTTP (the
// environment the test gives the child), info logs with the access and
// audit lines.
var budgetBaseConfig = template.Must(template.New("config").Parse(`server:
  listen: {{.Addr}}
  metrics_listen: {{.MetricsAddr}}
  drain_delay: 0s
tools:
  toolsets: [core]
auth:
  resource: http://{{.Addr}}/mcp
  issuers:
    - issuer: {{.Issuer}}
      algorithms: [ES256]
  scopes_supported: [mcp:tools, mcp:echo]
  required_scopes: [mcp:tools]
  policy:
    - tool: echo
      scopes: [mcp:echo]
{{.Policy}}limits:
  max_in_flight: 100000
  max_in_flight_per_principal: 100000
  rate_per_principal: 1000000000
  burst_per_principal: 1000000000
log:
  level: info
{{.Extra}}`))

// budget is one line of testdata/budgets.txt: the most one call of a
// path may cost, and why it is what it is.
type budget struct {
	path                        string
	instructions, allocs, bytes float64
	reason                      string
}

// measurement is what one call of a path cost, averaged over the window.
type measurement struct {
	instructions, allocs, bytes float64
	collections                 uint64
}

func (m measurement) String() string {
	return fmt.Sprintf("%.0f instructions, %.1f allocations, %.0f bytes per call", m.instructions, m.allocs, m.bytes)
}

// budgetsFile is where the budgets are kept.
const budgetsFile = "testdata/budgets.txt"

// readBudgets parses budgetsFile: one line per path, its name, its
// instructions, allocations and bytes per call, then the reason; blank
// lines and lines starting with # are comments.
func readBudgets(data []byte) (map[string]budget, error) {
	out := map[string]budget{}
	var errs []error
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 5 {
			errs = append(errs, fmt.Errorf("line %d: want a path, instructions, allocations, bytes and a reason", i+1))
			continue
		}
		b := budget{path: f[0], reason: strings.Join(f[4:], " ")}
		for j, dst := range []*float64{&b.instructions, &b.allocs, &b.bytes} {
			v, err := strconv.ParseFloat(f[1+j], 64)
			if err != nil || v <= 0 {
				errs = append(errs, fmt.Errorf("line %d: %q is not a positive number", i+1, f[1+j]))
			}
			*dst = v
		}
		if _, dup := out[b.path]; dup {
			errs = append(errs, fmt.Errorf("line %d: a second budget for %s", i+1, b.path))
		}
		out[b.path] = b
	}
	return out, errors.Join(errs...)
}

// check returns what of m exceeds b by more than the margins, nil if
// nothing does.
func (b budget) check(m measurement) error {
	var errs []error
	over := func(what string, got, want, margin float64) {
		if got > want*(1+margin) {
			errs = append(errs, fmt.Errorf("%s: %.0f per call, over the budget of %.0f by %.1f %% (margin %.0f %%)",
				what, got, want, 100*(got/want-1), 100*margin))
		}
	}
	over("instructions", m.instructions, b.instructions, budgetInstrMargin)
	over("allocations", m.allocs, b.allocs, budgetAllocsMargin)
	over("bytes", m.bytes, b.bytes, budgetBytesMargin)
	return errors.Join(errs...)
}

// slack says what of m is well below b (a budget to lower), "" if nothing.
func (b budget) slack(m measurement) string {
	var out []string
	under := func(what string, got, want float64) {
		if got < want*(1-budgetSlack) {
			out = append(out, fmt.Sprintf("%s %.0f against %.0f", what, got, want))
		}
	}
	under("instructions", m.instructions, b.instructions)
	under("allocations", m.allocs, b.allocs)
	under("bytes", m.bytes, b.bytes)
	return strings.Join(out, ", ")
}

// TestCallBudgetFile: every path has one budget with a reason, and every
// budget a path (runs everywhere, without valgrind).
func TestCallBudgetFile(t *testing.T) {
	data, err := os.ReadFile(budgetsFile)
	if err != nil {
		t.Fatal(err)
	}
	budgets, err := readBudgets(data)
	if err != nil {
		t.Fatalf("%s: %v", budgetsFile, err)
	}
	for _, p := range budgetPaths {
		if _, ok := budgets[p.name]; !ok {
			t.Errorf("%s: no budget for the path %s", budgetsFile, p.name)
		}
	}
	for name := range budgets {
		if !slices.ContainsFunc(budgetPaths, func(p budgetPath) bool { return p.name == name }) {
			t.Errorf("%s: a budget for %s, which budget_test.go does not measure", budgetsFile, name)
		}
	}
}

// TestBudgetCheck: the margins let through what is within them and fail
// what exceeds them, each quantity on its own.
func TestBudgetCheck(t *testing.T) {
	b := budget{path: "p", instructions: 1000, allocs: 100, bytes: 10000}
	for _, tt := range []struct {
		name string
		m    measurement
		want string // "" passes; else a word of the error
	}{
		{name: "at the budget", m: measurement{instructions: 1000, allocs: 100, bytes: 10000}},
		{name: "within the margins", m: measurement{instructions: 1029, allocs: 102, bytes: 10490}},
		{name: "instructions over", m: measurement{instructions: 1031, allocs: 100, bytes: 10000}, want: "instructions"},
		{name: "allocations over", m: measurement{instructions: 1000, allocs: 103, bytes: 10000}, want: "allocations"},
		{name: "bytes over", m: measurement{instructions: 1000, allocs: 100, bytes: 10600}, want: "bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := b.check(tt.m)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("check: %v, want none", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("check: %v, want an error about %s", err, tt.want)
			}
		})
	}
}

// TestCallBudget measures each path under callgrind and holds it to its
// budget; builtin's subtest planted-regression shows that a regression of
// the size the margins are meant to catch fails it: a second window of
// builtin's server, with the regression planted.
func TestCallBudget(t *testing.T) {
	if os.Getenv(budgetEnv) == "" {
		t.Skipf("the call budget runs under make budget (%s=1, valgrind, the shipped build)", budgetEnv)
	}
	if raceEnabled {
		t.Skip("valgrind cannot run a binary built with -race")
	}
	if runtime.GOARCH != "amd64" {
		t.Skipf("the budgets are amd64 instruction counts; this is %s", runtime.GOARCH)
	}
	valgrind, err := exec.LookPath("valgrind")
	if err != nil {
		t.Fatalf("valgrind not found on PATH: scripts/install-valgrind.sh (make budget runs it): %v", err)
	}
	if !sdkDecodesInPlace(t) {
		t.Fatal("the budgets are the shipped build's: run on the patched SDK (go test -modfile .cache/sdk-patched/go.mod, as make budget does)")
	}
	data, err := os.ReadFile(budgetsFile)
	if err != nil {
		t.Fatal(err)
	}
	budgets, err := readBudgets(data)
	if err != nil {
		t.Fatalf("%s: %v", budgetsFile, err)
	}
	paths, planted := budgetPaths, true
	if only := os.Getenv(budgetOnlyEnv); only != "" {
		names := strings.Split(only, ",")
		planted = slices.Contains(names, "planted-regression")
		if planted {
			names = append(names, budgetPaths[0].name)
		}
		paths = slices.DeleteFunc(slices.Clone(paths), func(p budgetPath) bool { return !slices.Contains(names, p.name) })
	}
	env := startBudgetEnv(t, valgrind, slices.ContainsFunc(paths, func(p budgetPath) bool { return p.redis }))
	sem := make(chan struct{}, budgetParallel)
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			b, ok := budgets[p.name]
			if !ok {
				t.Fatalf("%s: no budget for %s", budgetsFile, p.name)
			}
			// A regression planted in the call path (a loop and one 4 KiB
			// allocation per call, in a handler around the whole stack):
			// three times the margin in instructions, and more than it in
			// bytes; it fails even a budget that is stale by budgetSlack.
			plant := 0
			if planted && p.name == budgetPaths[0].name {
				plant = int(3 * budgetInstrMargin * b.instructions)
			}
			m, pm := env.measure(t, p, plant)
			t.Logf("%s: %s (budget %.0f instructions, %.0f allocations, %.0f bytes)", p.about, m, b.instructions, b.allocs, b.bytes)
			if m.collections > 0 {
				t.Logf("%d garbage collections ran in the window: the instructions include them", m.collections)
			}
			if err := b.check(m); err != nil {
				t.Errorf("%s costs more than its budget in %s:\n%v\nFind what: %s=%s and callgrind_annotate on the dump, or go tool pprof on a profile (docs/performance.md). "+
					"A budget is raised only in a reviewed change of %s saying why.", p.about, budgetsFile, err, budgetKeepEnv, "DIR", budgetsFile)
			} else if s := b.slack(m); s != "" {
				t.Logf("well below the budget (%s): lower it in %s with the change that earned it", s, budgetsFile)
			}
			if plant == 0 {
				return
			}
			t.Run("planted-regression", func(t *testing.T) {
				err := b.check(pm)
				t.Logf("%s with a regression planted: %s; check: %v", p.name, pm, err)
				if err == nil || !strings.Contains(err.Error(), "instructions") || !strings.Contains(err.Error(), "bytes") {
					t.Errorf("a regression of %.0f %% more instructions and 4 KiB more per call passed the budget check (%v): the budget cannot catch what it is for",
						300*budgetInstrMargin, err)
				}
			})
		})
	}
}

// budgetEnvironment is what every path's child shares: the IdP, the OTLP
// sink, the upstream, Redis.
type budgetEnvironment struct {
	valgrind string
	idp      *oidctest.Issuer
	key      *oidctest.Key
	sinkURL  string
	upstream string // the upstream's MCP URL
	redis    string // host:port, when a path needs it
	keep     string
}

func startBudgetEnv(t *testing.T, valgrind string, withRedis bool) *budgetEnvironment {
	key := oidctest.NewECKey("budget-ec")
	e := &budgetEnvironment{valgrind: valgrind, key: key, keep: os.Getenv(budgetKeepEnv)}
	e.idp = oidctest.Start(t, oidctest.Options{Keys: []*oidctest.Key{key}, Claims: map[string]any{"client_id": "budget"}})
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(sink.Close)
	e.sinkURL = sink.URL
	up := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return budgetUpstream() }, &sdk.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(up.Close)
	e.upstream = up.URL + "/mcp"
	if withRedis {
		e.redis = redistest.Start(t).Addr
	}
	if e.keep != "" {
		if err := os.MkdirAll(e.keep, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

var (
	budgetUpstreamOnce   sync.Once
	budgetUpstreamServer *sdk.Server
)

// budgetUpstream is the upstream MCP server of the proxied paths: echo,
// and echo_bound, whose text is bound to a header (x-mcp-header), which
// sends Portcullis's calls of it through the SDK client.
func budgetUpstream() *sdk.Server {
	budgetUpstreamOnce.Do(func() {
		s := sdk.NewServer(&sdk.Implementation{Name: "budget-upstream", Version: "1"}, nil)
		echo := func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var in struct{ Text string }
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil
		}
		s.AddTool(&sdk.Tool{Name: "echo", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"text": map[string]any{"type": "string"},
		}}}, echo)
		s.AddTool(&sdk.Tool{Name: "echo_bound", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"text": map[string]any{"type": "string", "x-mcp-header": "Text"},
		}}}, echo)
		budgetUpstreamServer = s
	})
	return budgetUpstreamServer
}

// freeLoopbackAddr returns a free port of 127.0.0.1, for a child to
// listen on.
func freeLoopbackAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// measure starts the child for path p under callgrind and measures
// budgetCalls calls; plant > 0 then plants a regression of about that many
// instructions per call and measures budgetCalls more, in planted.
func (e *budgetEnvironment) measure(t *testing.T, p budgetPath, plant int) (m, planted measurement) {
	dir := t.TempDir()
	vars := budgetVars{Addr: freeLoopbackAddr(t), MetricsAddr: freeLoopbackAddr(t), Issuer: e.idp.URL(), Upstream: e.upstream, Redis: e.redis,
		SecretFile: filepath.Join(dir, "idp-secret"), AuditFile: filepath.Join(dir, "audit.jsonl")}
	if err := os.WriteFile(vars.SecretFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var extra, policy strings.Builder
	for _, part := range []struct {
		dst *strings.Builder
		tpl string
	}{{&extra, p.config}, {&policy, p.policy}} {
		if err := template.Must(template.New(p.name).Parse(part.tpl)).Execute(part.dst, vars); err != nil {
			t.Fatal(err)
		}
	}
	vars.Extra, vars.Policy = extra.String(), policy.String()
	var cfg strings.Builder
	if err := budgetBaseConfig.Execute(&cfg, vars); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.valgrind, "--tool=callgrind", "--instr-atstart=no",
		"--callgrind-out-file="+filepath.Join(dir, "callgrind.out"), "--log-file="+filepath.Join(dir, "valgrind.log"),
		os.Args[0], "-test.run=^TestCallBudgetChild$", "-test.count=1")
	cmd.Env = append(budgetChildEnviron(),
		budgetChildEnv+"="+dir,
		// One P: the scheduler does not spin looking for work, which
		// would count instructions that depend on timing.
		"GOMAXPROCS=1",
		"GODEBUG=asyncpreemptoff=1",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+e.sinkURL,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		// The child flushes around the window; no timer exports in it.
		"OTEL_BSP_SCHEDULE_DELAY=3600000",
	)
	if extra := os.Getenv(budgetServeEnv); extra != "" {
		// The OpenTelemetry SDK reads its variables from the process.
		cmd.Env = append(append(cmd.Env, budgetServeEnv+"="+extra), strings.Split(extra, ";")...)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	replies := make(chan string, 4)
	go func() {
		defer close(replies)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "budget "); ok {
				replies <- rest
			}
		}
	}()
	// The child is killed once its last window is dumped: what it
	// would do to stop costs a second of valgrind's time and measures
	// nothing.
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	childLog := func() string {
		var out []string
		for _, f := range []string{"server.log", "valgrind.log"} {
			b, _ := os.ReadFile(filepath.Join(dir, f))
			if len(b) > 4096 {
				b = b[len(b)-4096:]
			}
			out = append(out, f+":\n"+string(b))
		}
		return strings.Join(out, "\n")
	}
	await := func(prefix string) string {
		t.Helper()
		select {
		case r, ok := <-replies:
			if !ok || !strings.HasPrefix(r, prefix) {
				t.Fatalf("the child answered %q, want %s\n%s", r, prefix, childLog())
			}
			return strings.TrimSpace(strings.TrimPrefix(r, prefix))
		case <-ctx.Done():
			t.Fatalf("no %s from the child\n%s", prefix, childLog())
		}
		return ""
	}
	await("ready")
	base := "http://" + vars.Addr
	waitReady(t, ctx, base, childLog)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	path := p.mcpPath
	if path == "" {
		path = mcpPath
	}
	token := e.token(t, client, base, base+path, p.authServer)
	call := budgetCaller(t, client, base+path, token, p)
	// Ready means an upstream is connected; its tools may be listed a
	// moment later.
	for err := call(); err != nil; err = call() {
		if !strings.Contains(err.Error(), "Unknown tool") || ctx.Err() != nil {
			t.Fatalf("the first call: %v\n%s", err, childLog())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range budgetWarmup {
		if err := call(); err != nil {
			t.Fatalf("warm-up: %v\n%s", err, childLog())
		}
	}
	window := func(n int, name string) measurement {
		t.Helper()
		fmt.Fprintln(stdin, "zero")
		await("zeroed")
		for range budgetCalls {
			if err := call(); err != nil {
				t.Fatalf("%v\n%s", err, childLog())
			}
		}
		fmt.Fprintln(stdin, "dump "+name)
		var mallocs, bytes, gcs uint64
		if _, err := fmt.Sscan(await("dumped"), &mallocs, &bytes, &gcs); err != nil {
			t.Fatal(err)
		}
		// Each dump is a file of its own, numbered from 1.
		dump := filepath.Join(dir, "callgrind.out."+strconv.Itoa(n))
		instr, err := callgrindTotal(dump)
		if err != nil {
			t.Fatalf("%v\n%s", err, childLog())
		}
		if e.keep != "" {
			if data, err := os.ReadFile(dump); err == nil {
				os.WriteFile(filepath.Join(e.keep, name+".callgrind"), data, 0o644)
			}
		}
		return measurement{
			instructions: float64(instr) / budgetCalls,
			allocs:       float64(mallocs) / budgetCalls,
			bytes:        float64(bytes) / budgetCalls,
			collections:  gcs,
		}
	}
	m = window(1, p.name)
	if p.audited {
		checkAudited(t, ctx, vars.AuditFile, budgetCalls+budgetWarmup+1, childLog)
	}
	if plant > 0 {
		fmt.Fprintln(stdin, "plant", plant)
		await("planted")
		planted = window(2, p.name+"-planted")
	}
	return m, planted
}

// checkAudited waits until file holds at least calls successful
// tool.call events (the sink writes them from its own goroutine), and
// fails when ctx ends first.
func checkAudited(t *testing.T, ctx context.Context, file string, calls int, childLog func() string) {
	t.Helper()
	for {
		data, _ := os.ReadFile(file)
		n := bytes.Count(data, []byte(`"type":"tool.call","outcome":"success"`))
		if n >= calls {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s holds %d successful tool.call events, want %d\n%s", file, n, calls, childLog())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// budgetChildEnviron is this process's environment without what would
// change how the child runs: Portcullis's configuration, telemetry, the
// Go runtime's settings.
func budgetChildEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PORTCULLIS_") || strings.HasPrefix(k, "OTEL_") || strings.HasPrefix(k, "CALL_BUDGET") ||
			slices.Contains([]string{"GOGC", "GOMEMLIMIT", "GODEBUG", "GOMAXPROCS", "AUTOMEMLIMIT"}, k) {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// waitReady polls base's /readyz until it answers 200: the issuer's keys
// fetched, the upstreams listed.
func waitReady(t *testing.T, ctx context.Context, base string, childLog func() string) {
	t.Helper()
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the child never became ready (%v)\n%s", err, childLog())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// token returns an access token for resource with the scopes every path
// needs: from the IdP, or (authServer) from Portcullis's authorization
// server at base, for an ID-JAG of the IdP.
func (e *budgetEnvironment) token(t *testing.T, client *http.Client, base, resource string, authServer bool) string {
	t.Helper()
	now := time.Now()
	const scope = "mcp:tools mcp:echo"
	if !authServer {
		return e.key.Sign(e.idp.Claims(map[string]any{
			"sub": "budget-user", "aud": resource, "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(), "scope": scope,
		}))
	}
	assertion := e.key.Sign(map[string]any{
		"iss": e.idp.URL(), "sub": "budget-user", "aud": base, "client_id": "app", "jti": rand.Text(),
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "resource": resource, "scope": scope,
	}, oidctest.Type("oauth-id-jag+jwt"))
	resp, err := client.PostForm(base+"/oauth/token", url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {assertion},
		"client_id": {"app"}, "resource": {resource},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &tok); err != nil || tok.AccessToken == "" {
		t.Fatalf("the authorization server's token endpoint: %d %s", resp.StatusCode, body)
	}
	return tok.AccessToken
}

// budgetCaller returns a function that makes one call of p at endpoint
// and checks that its answer carries the text sent. A legacy path opens
// its session first.
func budgetCaller(t *testing.T, client *http.Client, endpoint, token string, p budgetPath) func() error {
	t.Helper()
	version := "2026-07-28"
	session := ""
	post := func(body string, header http.Header) (*http.Response, []byte, error) {
		req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
		if err != nil {
			return nil, nil, err
		}
		req.Header = header
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, nil, err
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, out, err
	}
	meta := `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"budget","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	if p.legacy {
		version, meta = "2025-11-25", ""
		resp, out, err := post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"budget","version":"1"}}}`, http.Header{})
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("initialize: %v %v %s", err, resp, out)
		}
		if session = resp.Header.Get("Mcp-Session-Id"); session == "" {
			t.Fatalf("initialize: no session id: %s", out)
		}
		resp, out, err = post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, http.Header{"Mcp-Protocol-Version": {version}})
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("notifications/initialized: %v %v %s", err, resp, out)
		}
	}
	id := 0
	return func() error {
		id++
		text := "t" + strconv.Itoa(id)
		body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"` + p.tool + `","arguments":{"text":"` + text + `"}` + meta + `}}`
		header := http.Header{"Mcp-Protocol-Version": {version}}
		if !p.legacy {
			header.Set("Mcp-Method", "tools/call")
			header.Set("Mcp-Name", p.tool)
		}
		if p.paramHeader != "" {
			header.Set(p.paramHeader, text)
		}
		resp, out, err := post(body, header)
		if err != nil {
			return fmt.Errorf("call %d: %w", id, err)
		}
		if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"text":"`+text+`"`)) {
			return fmt.Errorf("call %d: status %d: %s", id, resp.StatusCode, out)
		}
		return nil
	}
}

// callgrindTotal reads the instruction total of a callgrind dump.
func callgrindTotal(file string) (uint64, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, fmt.Errorf("the callgrind dump: %w", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "totals: "); ok {
			return strconv.ParseUint(strings.Fields(v)[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no totals line", file)
}

// TestCallBudgetChild is the server of one path of TestCallBudget, run by
// it under callgrind (and skipped otherwise): serve with the path's
// configuration, and on the commands read from stdin, "zero" (flush the
// spans, collect garbage, start counting), "dump LABEL" (flush the spans
// of the window, dump the counts, report the allocations) and "plant N"
// (plant a regression of about N instructions per call), each answered on
// stdout. It stops when stdin closes.
func TestCallBudgetChild(t *testing.T) {
	dir := os.Getenv(budgetChildEnv)
	if dir == "" {
		t.Skip("TestCallBudget's server, run by it under callgrind")
	}
	if !callgrind.Running() {
		t.Fatal("not under valgrind")
	}
	var plant atomic.Int64
	apps := make(chan *app, 1)
	serveHook = func(a *app, h http.Handler) http.Handler {
		apps <- a
		return plantedRegression(h, &plant)
	}
	defer func() { serveHook = nil }()
	logs, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var environ []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OTEL_") {
			environ = append(environ, kv)
		}
	}
	if extra := os.Getenv(budgetServeEnv); extra != "" {
		for _, kv := range strings.Split(extra, ";") {
			if !strings.HasPrefix(kv, "OTEL_") {
				environ = append(environ, kv)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--config", filepath.Join(dir, "config.yaml")}, environ, strings.NewReader(""), io.Discard, logs)
	}()
	var a *app
	select {
	case a = <-apps:
	case code := <-exited:
		t.Fatalf("serve exited with %d", code)
	}
	flush := func() {
		if f, ok := a.tracing.Provider.(interface{ ForceFlush(context.Context) error }); ok {
			if err := f.ForceFlush(ctx); err != nil {
				t.Errorf("flushing spans: %v", err)
			}
		}
	}
	fmt.Println("budget ready")
	var before runtime.MemStats
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "zero":
			flush()
			runtime.GC()
			runtime.ReadMemStats(&before)
			callgrind.StartInstrumentation()
			callgrind.ZeroStats()
			fmt.Println("budget zeroed")
		case "dump":
			flush()
			callgrind.DumpStatsAt(arg)
			callgrind.StopInstrumentation()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			fmt.Printf("budget dumped %d %d %d\n", after.Mallocs-before.Mallocs, after.TotalAlloc-before.TotalAlloc, after.NumGC-before.NumGC)
		case "plant":
			n, err := strconv.ParseInt(arg, 10, 64)
			if err != nil {
				t.Fatalf("plant %q: %v", arg, err)
			}
			plant.Store(n)
			fmt.Println("budget planted")
		default:
			t.Fatalf("unknown command %q", sc.Text())
		}
	}
	cancel()
	if code := <-exited; code != 0 {
		t.Fatalf("serve exited with %d", code)
	}
}

// plantedSink keeps the planted regression's work from being optimized
// away.
var plantedSink atomic.Pointer[[]byte]

// plantedRegression is h with a regression planted in front once n is
// set: per request, a loop of about n instructions and one 4 KiB
// allocation. Until then it adds an atomic load per request.
func plantedRegression(h http.Handler, n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := n.Load(); n > 0 {
			buf := make([]byte, 4096)
			buf[0] = byte(spin(int(n) / 7))
			plantedSink.Store(&buf)
		}
		h.ServeHTTP(w, r)
	})
}

// spin runs about 7n instructions.
//
//go:noinline
func spin(n int) int {
	x := 0
	for i := range n {
		x = x*31 + i
	}
	return x
}
