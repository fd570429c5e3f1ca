package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/config"
	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/loopback"
	"github.com/portcullis-mcp/portcullis/mcp"
	"github.com/portcullis-mcp/portcullis/observability"
	"github.com/portcullis-mcp/portcullis/tasks"
	"github.com/portcullis-mcp/portcullis/tools"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// Set by the linker: -ldflags "-X github.com/portcullis-mcp/portcullis/internal/server.version=…"
// and the same for revision (see the Makefile's LDFLAGS), and sdkPatches
// to the names of the patches/go-sdk patches the binary was built with
// (make build, scripts/sdk-patch.sh).
var (
	version    = "dev"
	revision   = ""
	sdkPatches = ""
)

const usage = `Usage: portcullis [command] [flags]

Commands:
  serve          serve MCP over Streamable HTTP on /mcp (the default)
  stdio          serve MCP over stdin/stdout (logs go to stderr)
  check-config   validate the configuration, report every problem, and exit
  doctor URL     check a deployment the way a connector sees it (metadata,
                 401 challenge, authorization server, Origin and Mcp-Method
                 checks; with --token, initialize and tools/list)
  version        print the version and exit
  help           print this help

Run "portcullis COMMAND -h" for a command's flags. Every configuration key
can also be set by an environment variable: PORTCULLIS_ followed by the key
path in upper case with dots as underscores (server.listen is
PORTCULLIS_SERVER_LISTEN).
`

// run is the program as the binary runs it: it reports a failure on
// stderr and returns the exit code (see [ExitCode]).
func run(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return Main(ctx, args, environ, stdin, stdout, stderr, Extensions{})
}

// Main runs the command line args with ext, reports a failure on stderr
// and returns the exit code: 0 on success, 1 on failure, 2 on a usage
// error.
func Main(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer, ext Extensions) int {
	err := Execute(ctx, args, environ, stdin, stdout, stderr, ext)
	if err != nil {
		fmt.Fprintln(stderr, err)
	}
	return ExitCode(err)
}

// Execute runs the command line args (the program name excluded): the
// command, "serve" when none is given, with its flags. environ is the
// process environment (KEY=VALUE). It returns nil on success and when help
// was asked for, else an [*Error] that names the command.
func Execute(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer, ext Extensions) error {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = runServe(ctx, args, environ, stdout, stderr, ext)
	case "stdio":
		err = runStdio(ctx, args, environ, stdin, stdout, stderr, ext)
	case "check-config":
		err = runCheckConfig(args, environ, stdout, stderr)
	case "doctor":
		err = runDoctor(ctx, args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, versionString())
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		return &Error{Command: cmd, Err: fmt.Errorf("unknown command %q\n\n%s", cmd, strings.TrimSuffix(usage, "\n")), unknown: true}
	}
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return &Error{Command: cmd, Err: err}
}

// Error is a failed command. Its message is what the binary prints: one
// line per problem, so that a bad configuration is fixed in one pass.
type Error struct {
	// Command is the command that failed ("serve", "check-config", …).
	Command string
	// Err is what went wrong.
	Err     error
	unknown bool // Command is not a command
}

func (e *Error) Error() string {
	if e.unknown {
		return "portcullis: " + e.Err.Error()
	}
	var ue usageError
	if errors.As(e.Err, &ue) {
		return fmt.Sprintf("portcullis %s: %v", e.Command, ue.err)
	}
	problems := unjoin(e.Err)
	if len(problems) == 1 {
		return fmt.Sprintf("portcullis %s: %v", e.Command, problems[0])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "portcullis %s: %d problems:", e.Command, len(problems))
	for _, p := range problems {
		fmt.Fprintf(&b, "\n  - %v", p)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// ExitCode is the exit status for err as [Execute] returns it: 0 for nil,
// 2 for a usage error (an unknown command, a bad flag), 1 for any other.
func ExitCode(err error) int {
	var e *Error
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e) && e.unknown, errors.As(err, &ue):
		return 2
	default:
		return 1
	}
}

type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }

func versionString() string {
	sdk := "go-sdk " + sdkVersion()
	if sdkPatches != "" {
		sdk += " patched: " + sdkPatches
	}
	return fmt.Sprintf("portcullis %s (revision %s, %s, %s)", version, revisionString(), runtime.Version(), sdk)
}

// sdkVersion is the version of the MCP Go SDK in the build info.
func sdkVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/modelcontextprotocol/go-sdk" {
				return d.Version
			}
		}
	}
	return "unknown"
}

// revisionString is the VCS revision: stamped by the linker, else read from
// the build info, else "unknown".
func revisionString() string {
	rev := revision
	if rev == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					rev = s.Value
				}
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	return rev
}

// commonFlags are the flags every command that loads configuration takes.
type commonFlags struct {
	fs         *flag.FlagSet
	configPath string
	listen     string
	metrics    string
	dev        bool
}

func newFlags(name string, stderr io.Writer, serving bool) *commonFlags {
	f := &commonFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	f.fs.SetOutput(stderr)
	f.fs.StringVar(&f.configPath, "config", "", "configuration `file` (YAML)")
	if serving {
		f.fs.StringVar(&f.listen, "listen", "", "MCP listen `address` (overrides server.listen)")
		f.fs.StringVar(&f.metrics, "metrics-listen", "", "metrics listen `address` (overrides server.metrics_listen)")
		f.fs.BoolVar(&f.dev, "dev", false, "development mode: loopback only, a per-process request-state key")
	}
	return f
}

func (f *commonFlags) parse(args []string) error {
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if f.fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %v", f.fs.Args())}
	}
	return nil
}

func (f *commonFlags) apply(c *Config) {
	if f.listen != "" {
		c.Server.Listen = f.listen
	}
	if f.metrics != "" {
		c.Server.MetricsListen = f.metrics
	}
}

func runCheckConfig(args, environ []string, stdout, stderr io.Writer) error {
	f := newFlags("check-config", stderr, true)
	keys := f.fs.Bool("keys", false, "list every configuration key and its environment variable, and exit")
	if err := f.parse(args); err != nil {
		return err
	}
	if *keys {
		for _, k := range config.Keys(&Config{}, envPrefix) {
			fmt.Fprintf(stdout, "%-45s %s\n", k.Path, k.Env)
		}
		return nil
	}
	if _, err := loadConfig(f.configPath, environ, f); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "configuration OK")
	return nil
}

// app is what both transports serve: the SDK server and its catalog, and
// the telemetry around them.
type app struct {
	cfg     *Config
	logger  *slog.Logger
	catalog *tools.Catalog
	server  *sdk.Server
	metrics *observability.Metrics
	tracing *observability.Tracing
	// upstreams runs the upstream MCP servers; nil when none is configured.
	upstreams *upstream.Manager
	// onDenied logs and counts tool calls answered as unknown tools.
	onDenied mcp.DenialHook
	// tasks runs long tool calls as tasks of the MCP tasks extension.
	tasks *tasks.Manager
	// redis is the Redis replicas share (tasks, rate limits); nil if none.
	redis *redis.Client
}

// newApp builds the server and its telemetry. environ supplies the OTEL_*
// settings, and the service-link variables the configuration ignored, which
// newApp logs; the OTLP exporter reads the process environment itself,
// which is the same in production. policy is the per-tool policy the server
// applies to what callers list and call (nil: none).
func newApp(ctx context.Context, cfg *Config, policy mcp.ToolPolicy, ext Extensions, environ []string, stderr io.Writer) (*app, error) {
	logger, err := observability.NewLogger(stderr, cfg.Log.Level)
	if err != nil {
		return nil, err
	}
	// Variables the kubelet injects for a Service named portcullis or
	// portcullis-*, which loadConfig skipped. Only the name is logged.
	for _, name := range config.IgnoredEnv(&Config{}, environ, envPrefix) {
		logger.Debug("ignoring a Kubernetes service-link variable", "variable", name)
	}
	metrics := observability.NewMetrics(prometheus.NewRegistry(), observability.BuildInfo{Version: version, Revision: revisionString(), SDKPatches: sdkPatches})
	tracing, err := observability.NewTracing(ctx, observability.TracingOptions{
		Getenv:         lookupEnv(environ),
		ServiceVersion: version,
		Metrics:        metrics,
	})
	if err != nil {
		return nil, err // each problem names its OTEL_* variable
	}
	// The exporter reports failures (a collector that is down) through
	// OpenTelemetry's process-wide handler; send them to our log.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("telemetry export failed", "error", err)
	}))
	keys := [][]byte{mcp.NewRandomKey()}
	if cfg.MCP.RequestState.KeysFile != "" {
		if keys, err = mcp.LoadKeys(cfg.MCP.RequestState.KeysFile); err != nil {
			return nil, err
		}
	} else {
		logger.Info("request-state key generated for this process; set mcp.request_state.keys_file to share one key across replicas")
	}
	sealer, err := mcp.NewSealer(keys, cfg.MCP.RequestState.TTL, nil)
	if err != nil {
		return nil, err
	}
	upstream := tools.DefaultHTTPClient()
	upstream.Transport = tracing.Transport(upstream.Transport)
	cat, err := tools.New(cfg.Tools, tools.Deps{Logger: logger, HTTPClient: upstream})
	if err != nil {
		return nil, err
	}
	if err := ext.Apply(cat); err != nil {
		return nil, err
	}
	// Upstream MCP servers: the one hook (see upstream.go).
	ups, err := startUpstreams(ctx, cfg, cat, metrics, tracing, logger)
	if err != nil {
		return nil, err
	}
	// The catalog knows tools that upstreams add while serving too.
	known := cat.HasTool
	onDenied := toolDeniedHook(logger, metrics, known)
	telemetry := observability.MCPMiddleware(observability.MCPOptions{
		Metrics:         metrics,
		Tracing:         tracing,
		Logger:          logger,
		KnownTool:       known,
		Identity:        identity,
		RequestIDHeader: mcp.RequestIDHeader,
		RecordEnduserID: cfg.Telemetry.RecordEnduserID,
	})
	rdb, err := openRedis(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	taskMgr, err := newTaskManager(cfg, cat, rdb, metrics, logger)
	if err != nil {
		return nil, err
	}
	server := mcp.NewServer(cat, mcp.ServerConfig{
		Version: version,
		Sealer:  sealer,
		Logger:  logger,
		// Tools that the policy guards stay hidden from callers without a
		// token (stdio, or auth off on loopback): fail closed.
		Policy:       policy,
		OnDenied:     onDenied,
		Middleware:   []sdk.Middleware{telemetry},
		ToolTimeout:  cfg.MCP.ToolTimeout,
		ToolTimeouts: cfg.MCP.ToolTimeouts,
		LimitHook:    limitHook(logger, metrics),
		Tasks:        mcp.TaskConfig{Manager: taskMgr, Tool: cat.TaskSupport},
	})
	return &app{cfg: cfg, logger: logger, catalog: cat, server: server, metrics: metrics, tracing: tracing, upstreams: ups, onDenied: onDenied, tasks: taskMgr, redis: rdb}, nil
}

// identity names the caller for traces and audit lines: the token's
// subject and OAuth client.
func identity(ti *sdkauth.TokenInfo) (subject, clientID string) {
	if p, ok := auth.PrincipalFromTokenInfo(ti); ok {
		return p.Subject, p.ClientID
	}
	if ti != nil {
		return ti.UserID, ""
	}
	return "", ""
}

// lookupEnv returns a getenv over environ (KEY=VALUE entries; the last wins).
func lookupEnv(environ []string) func(string) string {
	return func(key string) string {
		v := ""
		for _, kv := range environ {
			if k, val, ok := strings.Cut(kv, "="); ok && k == key {
				v = val
			}
		}
		return v
	}
}

// shutdownTracing flushes queued spans, bounded so that a collector that is
// down cannot hold the exit.
func (a *app) shutdownTracing() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.tracing.Shutdown(ctx); err != nil {
		a.logger.Warn("flushing spans at exit", "error", err)
	}
}

func runStdio(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer, ext Extensions) error {
	f := newFlags("stdio", stderr, false)
	if err := f.parse(args); err != nil {
		return err
	}
	cfg, err := loadConfig(f.configPath, environ, nil)
	if err != nil {
		return err
	}
	// stdio has no token: the policy hides the tools it guards, unless the
	// operator opts out.
	policy := toolPolicy(cfg.Auth)
	if cfg.Auth.AllowStdioAllTools {
		policy = nil
	}
	a, err := newApp(ctx, cfg, policy, ext, environ, stderr)
	if err != nil {
		return err
	}
	defer a.shutdownTracing()
	defer a.stopUpstreams()
	if cfg.Auth.AllowStdioAllTools {
		a.logger.Warn("auth.allow_stdio_all_tools is on: stdio lists and calls every tool, including those auth.policy guards")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go a.catalog.Run(ctx, a.server)
	a.logger.Info("serving MCP on stdio", "version", version)
	return mcp.ServeStdio(ctx, a.server, stdin, stdout, 0)
}

func runServe(ctx context.Context, args, environ []string, stdout, stderr io.Writer, ext Extensions) error {
	f := newFlags("serve", stderr, true)
	if err := f.parse(args); err != nil {
		return err
	}
	cfg, err := loadConfig(f.configPath, environ, f)
	if err != nil {
		return err
	}
	if f.dev && !loopback.Host(cfg.Server.Listen) {
		return fmt.Errorf("--dev serves only on a loopback address, not %q: its embedded issuer mints tokens for anyone who asks", cfg.Server.Listen)
	}
	// Listen first: the address (port 0 in tests) decides dev mode's URLs.
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Server.Listen, err)
	}
	defer ln.Close()
	var dev *auth.DevIssuer
	if f.dev {
		if dev, err = setupDev(cfg, ln.Addr().String()); err != nil {
			return err
		}
	}
	mln, err := net.Listen("tcp", cfg.Server.MetricsListen)
	if err != nil {
		return fmt.Errorf("server.metrics_listen: listening on %s: %w", cfg.Server.MetricsListen, err)
	}
	defer mln.Close()
	a, err := newApp(ctx, cfg, toolPolicy(cfg.Auth), ext, environ, stderr)
	if err != nil {
		return err
	}
	defer a.shutdownTracing()
	defer a.stopUpstreams()
	defer tuneRuntime(environ, nil, a.logger).Stop()
	return a.serve(ctx, ln, mln, dev, stdout)
}

// devIssuerPath is where --dev mounts its embedded issuer.
const devIssuerPath = "/dev-issuer"

// setupDev turns on auth with an embedded issuer at addr, so the first run
// needs no identity provider but still exercises the real auth path.
func setupDev(cfg *Config, addr string) (*auth.DevIssuer, error) {
	dev, err := auth.NewDevIssuer("http://"+addr+devIssuerPath, nil)
	if err != nil {
		return nil, err
	}
	if cfg.Auth.Resource == "" {
		cfg.Auth.Resource = "http://" + addr + mcpPath
	}
	dev.DefaultAudience = cfg.Auth.Resource
	cfg.Auth.Issuers = append(cfg.Auth.Issuers, dev.IssuerOptions())
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return dev, nil
}

// devScopes are the scopes the printed dev token carries: every scope the
// configuration names, so the token can call every tool.
func devScopes(o auth.Options) []string {
	scopes := append(slices.Clone(o.ScopesSupported), o.RequiredScopes...)
	for _, p := range o.Policy {
		scopes = append(scopes, p.Scopes...)
	}
	slices.Sort(scopes)
	return slices.Compact(scopes)
}

// serve serves on ln until ctx ends, then drains: readiness fails, the
// listener closes after DrainDelay, GET streams end, and calls in flight get
// ShutdownGrace to finish.
func (a *app) serve(ctx context.Context, ln, metricsLn net.Listener, dev *auth.DevIssuer, stdout io.Writer) error {
	s := a.cfg.Server
	health := &observability.Health{}
	guard, access, err := a.authGuard(ctx, health)
	if err != nil {
		return err
	}
	readyUpstreams(a.upstreams, health)
	hook := limitHook(a.logger, a.metrics)
	mcpOpts := a.cfg.MCP
	mcpOpts.LimitHook = hook
	mcpOpts.PrincipalKey = principalKey
	mcpOpts.Tasks = a.tasks
	mcpHandler := mcp.NewHandler(a.server, mcpOpts, access, a.logger)
	limiter, err := limits.New(a.cfg.Limits, principalKey, hook, nil)
	if err != nil {
		return err
	}
	shareRateLimits(limiter, a.redis, a.cfg.Redis.KeyPrefix, a.logger)
	if a.redis != nil {
		defer a.redis.Close()
	}
	metricsSrv := a.metricsServer()
	chain := chainParts{
		bodyDeadline: limits.BodyDeadline(s.ReadBodyTimeout, hook),
		mcp:          mcpHandler,
		auth:         guard,
		refusals:     observability.Refusals(observability.RefusalOptions{Metrics: a.metrics, Tracing: a.tracing, KnownTool: a.catalog.HasTool}),
		limits:       limiter.Middleware,
		health:       health,
		dev:          dev,
	}
	srv := newHTTPServer(s, a.buildHandler(chain), a.logger)
	// net/http enforces the header size, header and idle timeouts itself;
	// the watched listener counts what they close.
	ln = a.metrics.WatchConns(srv, ln)

	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	go a.catalog.Run(bg, a.server)
	go a.tasks.Run(bg)

	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	go func() { errc <- metricsSrv.Serve(metricsLn) }()
	a.logger.Info("listening", "listener", "metrics", "addr", metricsLn.Addr().String(),
		"url", "http://"+metricsLn.Addr().String()+"/metrics")
	if a.tracing.Enabled {
		a.logger.Info("exporting traces", "exporter", a.tracing.Exporter)
	}
	url := "http://" + ln.Addr().String() + mcpPath
	// The banner comes before the "listening" line, so whoever waits for
	// that line (a person, a script, a test) finds the banner complete.
	if dev != nil {
		if err := printDevBanner(stdout, dev, a.cfg.Auth, url); err != nil {
			return err
		}
	}
	a.logger.Info("listening", "addr", ln.Addr().String(), "url", url, "version", version, "auth", a.cfg.Auth.Enabled())

	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	a.logger.Info("draining", "drain_delay", s.DrainDelay, "shutdown_grace", s.ShutdownGrace)
	health.SetDraining()
	if s.DrainDelay > 0 {
		t := time.NewTimer(s.DrainDelay)
		<-t.C
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.ShutdownGrace)
	defer cancel()
	mcpHandler.Drain()
	// The metrics listener closes last, so the drain itself can be scraped.
	defer metricsSrv.Close()
	// Tasks still running when the grace ends are failed, so that their
	// callers learn it now rather than when their lease runs out.
	defer a.tasks.Shutdown(sctx)
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("calls still in flight after shutdown_grace %s were cut off: %w", s.ShutdownGrace, err)
	}
	a.logger.Info("stopped")
	return nil
}

// newHTTPServer returns the MCP listener's server with the connection
// limits of s: a slowloris client that trickles headers is cut off after
// ReadHeaderTimeout (on every request of a kept-alive connection, not only
// the first), idle keep-alive connections after IdleTimeout, and headers
// over MaxHeaderBytes get 431. The body's time limit is not ReadTimeout,
// which fails reads silently, but [limits.BodyDeadline], which answers 408
// and counts what it cuts off.
func newHTTPServer(s ServerOptions, h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.ReadHeaderTimeout,
		IdleTimeout:       s.IdleTimeout,
		MaxHeaderBytes:    s.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		// No WriteTimeout: SSE responses and long tool calls stay open.
	}
}

// principalKey is what the per-principal limits key on: the token's issuer,
// subject and client id. With auth off there is none, and only the overall
// in-flight cap applies: keying on the client address would put every
// caller behind one proxy in one bucket.
func principalKey(r *http.Request) string {
	if p, ok := auth.PrincipalFrom(r.Context()); ok {
		return p.Issuer + "\x00" + p.Subject + "\x00" + p.ClientID
	}
	return ""
}

// limitHook receives every refusal by a limit (internal/limits and the MCP
// layer's body size, session cap and tool timeout): it counts it in
// metrics and logs it at debug level.
func limitHook(logger *slog.Logger, metrics *observability.Metrics) limits.Hook {
	return func(ctx context.Context, ev limits.Event) {
		if ev.Limit == limits.LimitRate {
			metrics.RateLimited("principal")
		} else {
			metrics.LimitRejected(string(ev.Limit))
		}
		logger.DebugContext(ctx, "limit reached", "limit", string(ev.Limit), "tool", ev.Tool)
	}
}

// metricsServer serves /metrics on its own listener, so that scraping
// needs no token and the MCP port exposes nothing but MCP.
func (a *app) metricsServer() *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metrics.Handler(a.logger))
	if a.cfg.Server.AllowPprof {
		a.logger.Warn("server.allow_pprof is on: the metrics listener serves Go runtime profiles at /debug/pprof/")
		SetMemProfiling(true)
		mux.HandleFunc("GET /debug/pprof/", pprof.Index) // the named profiles: heap, goroutine, allocs…
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: a.cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       a.cfg.Server.IdleTimeout,
		MaxHeaderBytes:    a.cfg.Server.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(a.logger.Handler(), slog.LevelWarn),
	}
}

// authGuard returns the middleware that guards /mcp and the per-tool access
// rules. With auth off (loopback only, or the loud opt-out) /mcp is open and
// tools that the policy guards are hidden.
func (a *app) authGuard(ctx context.Context, health *observability.Health) (func(http.Handler) http.Handler, mcp.Access, error) {
	o := a.cfg.Auth
	policy := toolPolicy(o)
	if !o.Enabled() {
		if o.InsecureAllowUnauthenticated {
			a.logger.Warn("auth.insecure_allow_unauthenticated is on: /mcp accepts calls from anyone who can reach it")
		}
		return func(h http.Handler) http.Handler { return h }, a.toolAccess(policy), nil
	}
	for i, iss := range o.Issuers {
		if iss.AllowHTTP {
			a.logger.Warn("an issuer is allowed over plain http; tokens and keys can be tampered with in transit", "key", fmt.Sprintf("auth.issuers[%d].allow_http", i), "issuer", iss.Issuer)
		}
		if iss.AllowUntypedAccessTokens {
			a.logger.Warn("an issuer's JWTs are accepted without typ at+jwt; only the ID-token claims tell its ID tokens from its access tokens", "key", fmt.Sprintf("auth.issuers[%d].allow_untyped_access_tokens", i), "issuer", iss.Issuer)
		}
	}
	if o.Introspection.AllowMissingAudience {
		a.logger.Warn("introspected tokens without an audience are accepted; a token the authorization server issued for another service is accepted here too", "key", "auth.introspection.allow_missing_audience")
	}
	o.Logger = a.logger
	v, err := auth.NewVerifier(ctx, o, nil, nil)
	if err != nil {
		return nil, mcp.Access{}, err
	}
	if r, ok := v.(auth.Readier); ok {
		// The key sets log why (see auth.Options.Logger); /readyz, which
		// anyone may call, says only what is not ready.
		health.AddCheck("issuer keys not loaded", r.Ready)
		// Fetch the keys now, in the background: the first request need
		// not wait for them, and an unreachable issuer is logged at start.
		go func() { _ = r.Ready(ctx) }()
	}
	metadataURL := auth.MetadataURL(o.Resource)
	access := a.toolAccess(policy)
	hook := func(_ context.Context, e auth.Event) { a.metrics.AuthEvent(e.Outcome, string(e.Reason)) }
	return auth.Middleware(v, o, metadataURL, hook, a.logger), access, nil
}

// toolAccess is how /mcp applies policy to tool calls: a call of a tool
// the caller may not see is answered as an unknown tool.
func (a *app) toolAccess(policy mcp.ToolPolicy) mcp.Access {
	return mcp.Access{Policy: policy, Tools: a.catalog, OnDenied: a.onDenied}
}

// toolDeniedHook receives every tools/call answered as an unknown tool: it
// counts it in portcullis_tool_calls_denied_total (the tool label bounded
// as the operation metric's: a registered name or _OTHER) and logs it with
// the caller, as auth failures are logged: at Info when the policy refused
// a registered tool, at Debug for a name that is not registered (so a
// scanner cannot flood the log). Never the token or the arguments.
func toolDeniedHook(logger *slog.Logger, metrics *observability.Metrics, known func(string) bool) mcp.DenialHook {
	return func(ctx context.Context, d mcp.Denial) {
		tool := observability.Other
		if known(d.Tool) {
			tool = d.Tool
		}
		metrics.ToolDenied(d.Reason, tool)
		level := slog.LevelDebug
		if d.Reason == mcp.DenialPolicy {
			level = slog.LevelInfo
		}
		if !logger.Enabled(ctx, level) {
			return
		}
		name := d.Tool
		if len(name) > maxLoggedName {
			name = strings.ToValidUTF8(name[:maxLoggedName], "") + "…"
		}
		attrs := []slog.Attr{slog.String("reason", d.Reason), slog.String("tool", name)}
		if p, ok := auth.PrincipalFromTokenInfo(d.Info); ok {
			attrs = append(attrs, slog.String("issuer", p.Issuer), slog.String("client_id", p.ClientID), slog.String("subject", p.Subject))
		}
		if len(d.Needed) > 0 {
			attrs = append(attrs, slog.Any("needed_scopes", d.Needed))
		}
		logger.LogAttrs(ctx, level, "tool call denied", attrs...)
	}
}

// maxLoggedName bounds a caller-chosen tool name in the log.
const maxLoggedName = 128

// toolPolicy returns the per-tool policy, or nil when auth.policy is empty:
// then every tool is open to whoever the middleware let in (which already
// checked auth.required_scopes), and the MCP layer skips the per-call and
// per-list checks.
func toolPolicy(o auth.Options) mcp.ToolPolicy {
	if len(o.Policy) == 0 {
		return nil
	}
	return auth.NewPolicy(o).Decide
}

func printDevBanner(w io.Writer, dev *auth.DevIssuer, o auth.Options, url string) error {
	const ttl = 8 * time.Hour
	token, err := dev.Mint("dev-user", o.Resource, devScopes(o), ttl)
	if err != nil {
		return fmt.Errorf("minting the dev token: %w", err)
	}
	fmt.Fprintf(w, `Portcullis %s is serving MCP at %s (dev mode: embedded issuer %s)

A token for subject dev-user, valid %s:

  export MCP_TOKEN=%s

Try it with the MCP Inspector (Node 22):

  npx --yes @modelcontextprotocol/inspector@2.12.0 --cli %s --transport http \
    --header "Authorization: Bearer $MCP_TOKEN" --method tools/list

More tokens: curl -s -d grant_type=client_credentials -d client_id=me -d resource=%s %s/token
`, version, url, dev.Issuer(), ttl, token, url, o.Resource, dev.Issuer())
	return nil
}
