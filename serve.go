package portcullis

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"time"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/authserver"
	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/loopback"
	"github.com/portcullis-mcp/portcullis/mcp"
	"github.com/portcullis-mcp/portcullis/observability"
)

// runServe serves MCP over Streamable HTTP until ctx ends, then drains.
func runServe(ctx context.Context, p process, ext extensions) error {
	f := newFlags("serve", p.stderr, true)
	if err := f.parse(p.args); err != nil {
		return err
	}
	cfg, err := loadConfig(f.configPath, p.environ, f)
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
	var dev *devIssuer
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
	a, err := newApp(ctx, cfg, mcp.HTTP, ext, p)
	if err != nil {
		return err
	}
	defer a.shutdownTracing()
	defer a.audit.close(a.logger)
	defer a.stopUpstreams()
	defer tuneRuntime(p.getenv, nil, a.logger).Stop()
	as, err := a.setupAuthServer()
	if err != nil {
		return fmt.Errorf("authorization_server: %w", err)
	}
	if _, err := a.setupConnections(ctx, as); err != nil {
		return fmt.Errorf("connections: %w", err)
	}
	return a.serve(ctx, ln, mln, dev, as, p.stdout)
}

// handler returns the MCP listener's handler (see buildHandler) with the
// parts the configuration asks for: auth, limits (their rate buckets in
// Redis when there is one), the virtual servers' routes, the dev issuer and
// the authorization server when on (nil when off). health learns whether
// the issuers and upstreams are ready.
func (a *app) handler(ctx context.Context, health *observability.Health, dev *devIssuer, as *authserver.Server) (http.Handler, error) {
	guard, err := authGuard(ctx, a.cfg.Auth, a.metrics, a.logger, health, a.audit)
	if err != nil {
		return nil, err
	}
	readyUpstreams(a.upstreams, health)
	hook := limitHook(a.logger, a.metrics, a.audit)
	limiter, err := limits.New(a.cfg.Limits, limits.Deps{Key: principalKey, Hook: hook})
	if err != nil {
		return nil, err
	}
	shareRateLimits(limiter, a.redis, a.cfg.Redis.KeyPrefix, a.logger)
	virtual, err := a.virtualRoutes(ctx, health, hook)
	if err != nil {
		return nil, err
	}
	return a.buildHandler(chainParts{
		virtual:      virtual,
		bodyDeadline: limits.BodyDeadline(a.cfg.Server.ReadBodyTimeout, hook),
		mcp:          a.server.Handler(),
		auth:         guard,
		refusals:     observability.Refusals(observability.RefusalOptions{Metrics: a.metrics, Tracing: a.tracing, KnownTool: a.catalog.HasTool}),
		limits:       limiter.Middleware,
		health:       health,
		dev:          dev,
		authServer:   as,
		connections:  a.connections.Load(),
	}), nil
}

// virtualRoutes builds the auth, limits and metadata of each virtual
// server. A server's token audience is its resource alone: the issuers'
// extra audiences (auth.issuers[].audiences, auth.introspection.audiences)
// stand for /mcp, and accepting them here would let a token for one server
// in at every other. With authorization_server on, the issuers hold its
// issuer (setupAuthServer runs before serve builds these), so each
// server's metadata names it and its guard verifies its tokens.
func (a *app) virtualRoutes(ctx context.Context, health *observability.Health, hook limits.Hook) ([]virtualRoute, error) {
	var out []virtualRoute
	for _, v := range a.virtual {
		o := a.cfg.Auth
		o.Resource, o.RequiredScopes, o.Policy = v.cfg.Resource, v.cfg.Auth.RequiredScopes, v.cfg.Auth.Policy
		o.ResourceName = cmp.Or(v.cfg.Title, o.ResourceName)
		o.Issuers = slices.Clone(o.Issuers)
		for i := range o.Issuers {
			o.Issuers[i].Audiences = nil
		}
		o.Introspection.Audiences = nil
		guard, err := authGuard(ctx, o, a.metrics, a.logger, health, a.audit)
		if err != nil {
			return nil, fmt.Errorf("servers: %s: %w", v.cfg.Name, err)
		}
		lo := a.cfg.Limits
		lo.RatePerPrincipal, lo.BurstPerPrincipal = v.cfg.Limits.RatePerPrincipal, v.cfg.Limits.BurstPerPrincipal
		limiter, err := limits.New(lo, limits.Deps{Key: principalKey, Hook: hook})
		if err != nil {
			return nil, fmt.Errorf("servers: %s: %w", v.cfg.Name, err)
		}
		// Each server's rate buckets are its own, in Redis too.
		shareRateLimits(limiter, a.redis, a.cfg.Redis.KeyPrefix+"server:"+v.cfg.Name+":", a.logger)
		view := v.server.View()
		refusals := observability.Refusals(observability.RefusalOptions{
			Metrics: a.metrics, Tracing: a.tracing, Server: v.cfg.Name, KnownTool: view.HasTool, OriginalTool: view.Original,
		})
		r := virtualRoute{name: v.cfg.Name, path: v.cfg.Path, mcp: v.server.Handler(), auth: guard, refusals: refusals, limits: limiter.Middleware, resource: v.cfg.Resource}
		if o.Enabled() {
			r.metadata = auth.MetadataHandler(o)
		}
		out = append(out, r)
	}
	return out, nil
}

// serveHook, when set, is given the app and the MCP listener's handler
// before serve serves it, and returns the handler to serve. Only tests set
// it: the call budget (budget_test.go) flushes the app's spans around what
// it measures, and wraps the handler with a planted regression.
var serveHook func(*app, http.Handler) http.Handler

// serve serves on ln until ctx ends, then drains: readiness fails, the
// listener closes after DrainDelay, GET streams end, and calls in flight get
// ShutdownGrace to finish.
func (a *app) serve(ctx context.Context, ln, metricsLn net.Listener, dev *devIssuer, as *authserver.Server, stdout io.Writer) error {
	s := a.cfg.Server
	health := &observability.Health{}
	if a.redis != nil {
		defer a.redis.Close()
	}
	handler, err := a.handler(ctx, health, dev, as)
	if err != nil {
		return err
	}
	if serveHook != nil {
		handler = serveHook(a, handler)
	}
	metricsSrv := a.metricsServer()
	srv := newHTTPServer(s, handler, a.logger)
	// net/http enforces the header size, header and idle timeouts itself;
	// the watched listener counts what they close.
	ln = a.metrics.WatchConns(srv, ln)

	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	// Closed once serving stopped, before the Redis client.
	defer a.startHandlers(bg)()
	go a.catalog.Run(bg, a.server.SDK())
	for _, v := range a.virtual {
		go a.catalog.Run(bg, v.server.SDK())
	}
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
		// The banner goes to stdout, which a log pipeline does not see.
		a.logger.Warn("dev mode: the embedded issuer mints tokens for anyone who can reach the loopback listener; dev mode is not for production", "flag", "--dev", "issuer", dev.Issuer())
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
	drain := s.drainDelay()
	a.logger.Info("draining", "drain_delay", drain, "shutdown_grace", s.ShutdownGrace)
	health.SetDraining()
	if drain > 0 {
		t := time.NewTimer(drain)
		<-t.C
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.ShutdownGrace)
	defer cancel()
	a.server.Handler().Drain()
	for _, v := range a.virtual {
		v.server.Handler().Drain()
	}
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

// startHandlers starts the /mcp handlers, the root server's and the
// virtual servers' (their shared sessions' subscriptions to the bus
// between replicas), and returns what closes them.
func (a *app) startHandlers(ctx context.Context) (closeAll func()) {
	hs := []*mcp.Handler{a.server.Handler()}
	for _, v := range a.virtual {
		hs = append(hs, v.server.Handler())
	}
	for _, h := range hs {
		h.Start(ctx)
	}
	return func() {
		for _, h := range hs {
			if err := h.Close(); err != nil {
				a.logger.Warn("closing the MCP handler", "error", err)
			}
		}
	}
}

// newHTTPServer returns the MCP listener's server with the connection
// limits of s: a slowloris client that trickles headers is cut off after
// ReadHeaderTimeout (on every request of a kept-alive connection, not only
// the first), idle keep-alive connections after IdleTimeout, and headers
// over MaxHeaderBytes get 431. The body's time limit is not ReadTimeout,
// which fails reads silently, but [limits.BodyDeadline], which answers 408
// and counts what it cuts off.
func newHTTPServer(s serverOptions, h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.ReadHeaderTimeout,
		IdleTimeout:       s.IdleTimeout,
		MaxHeaderBytes:    s.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		// No WriteTimeout: SSE responses and long tool calls stay open.
	}
}

// metricsServer serves /metrics on its own listener, so that scraping
// needs no token and the MCP port exposes nothing but MCP.
func (a *app) metricsServer() *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metrics.Handler(a.logger))
	if a.cfg.Server.AllowPprof {
		a.logger.Warn("server.allow_pprof is on: the metrics listener serves Go runtime profiles at /debug/pprof/")
		setMemProfiling(true)
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
