package portcullis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/authserver"
	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/config"
	"github.com/portcullis-mcp/portcullis/internal/connect"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
	"github.com/portcullis-mcp/portcullis/mcp"
	"github.com/portcullis-mcp/portcullis/observability"
	"github.com/portcullis-mcp/portcullis/tasks"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// app is what both transports serve: the SDK server and its catalog, and
// the telemetry around them.
type app struct {
	cfg     *configFile
	logger  *slog.Logger
	catalog *catalog.Catalog
	server  *mcp.Server
	metrics *observability.Metrics
	tracing *observability.Tracing
	// upstreams runs the upstream MCP servers; nil when none is configured.
	upstreams *upstream.Manager
	// tasks runs long tool calls as tasks of the MCP tasks extension.
	tasks *tasks.Manager
	// redis is the Redis replicas share (tasks, rate limits); nil if none.
	redis redis.UniversalClient
	// virtual are the virtual servers (servers), each on its own path.
	virtual []*virtualApp
	// audit emits the audit events; nil without audit sinks.
	audit *auditor
	// authServer is the authorization server; nil unless
	// authorization_server.enabled (see setupAuthServer).
	authServer atomic.Pointer[authserver.Server]
	// connections are users' connected accounts (nil unless an upstream
	// uses oauth.grant authorization_code), set up with the
	// authorization server.
	connections atomic.Pointer[connect.Service]
}

// newApp builds the server and its telemetry. p's environment supplies the
// OTEL_* settings, and the service-link variables the configuration
// ignored, which newApp logs; the OTLP exporter reads the process
// environment itself, which is the same in production. Logs go to p's
// stderr. The server is built for transport, with the per-tool policy of
// auth.policy (over stdio, none if auth.allow_stdio_all_tools says so).
func newApp(ctx context.Context, cfg *configFile, transport mcp.Transport, ext extensions, p process) (*app, error) {
	policy := toolPolicy(cfg.Auth)
	rulesOf := cfg.Auth.Policy
	if transport == mcp.Stdio && cfg.Auth.AllowStdioAllTools {
		policy, rulesOf = nil, nil
	}
	logger, err := observability.NewLogger(p.stderr, cfg.Log.Level)
	if err != nil {
		return nil, err
	}
	// Variables the kubelet injects for a Service named portcullis or
	// portcullis-*, which loadConfig skipped. Only the name is logged.
	for _, name := range config.IgnoredEnv(&configFile{}, p.environ, envPrefix) {
		logger.Debug("ignoring a Kubernetes service-link variable", "variable", name)
	}
	metrics := observability.NewMetrics(prometheus.NewRegistry(), buildInfo())
	tracing, err := observability.NewTracing(ctx, observability.TracingOptions{
		Getenv:         p.getenv,
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
	upstream := toolsets.DefaultHTTPClient()
	upstream.Transport = tracing.Transport(upstream.Transport)
	cat, err := toolsets.New(cfg.Tools, toolsets.Deps{Logger: logger, HTTPClient: upstream, Caller: caller})
	if err != nil {
		return nil, err
	}
	if err := ext.Apply(cat); err != nil {
		return nil, err
	}
	if err := ext.addServerTools(cfg.Servers); err != nil {
		return nil, err
	}
	// Upstream MCP servers: the one hook (see upstream.go). The
	// authorization server, when on, is set up after the app exists, so
	// the subject-token hook looks it up when called.
	au, err := newAuditor(ctx, cfg, metrics, logger, p.stderr)
	if err != nil {
		return nil, err
	}
	a := &app{cfg: cfg, logger: logger, catalog: cat, metrics: metrics, tracing: tracing, audit: au}
	subject := subjectToken(&a.authServer, logger, au)
	ups, err := startUpstreams(ctx, cfg, cat, metrics, tracing, logger, subject, accounts{&a.connections}, au)
	if err != nil {
		return nil, err
	}
	if err := registerHTTPAPIs(ctx, cfg.HTTPAPIs, cat, tracing, logger, subject, accounts{&a.connections}); err != nil {
		if ups != nil {
			_ = ups.Close()
		}
		return nil, err
	}
	// The catalog knows tools that upstreams add while serving too.
	known := cat.HasTool
	rules, err := newPolicyRules("auth.", rulesOf, "", cat.ToolFacts, func(name string) string { return name }, logger)
	if err != nil {
		return nil, err
	}
	telemetryOpts := observability.MCPOptions{
		Metrics:         metrics,
		Tracing:         tracing,
		Logger:          logger,
		KnownTool:       known,
		Identity:        identity,
		RequestIDHeader: mcp.RequestIDHeader,
		RecordEnduserID: cfg.Telemetry.RecordEnduserID,
		CalledAs:        mcp.CalledAs,
	}
	telemetry := observability.MCPMiddleware(telemetryOpts)
	rdb, err := openRedis(ctx, cfg, metrics, logger)
	if err != nil {
		return nil, err
	}
	// The tasks of a virtual server are counted under its name; its view
	// of the catalog is known once the servers are built, below.
	views := map[string]*catalog.ServerView{}
	taskMgr, taskMetrics, err := newTaskManager(cfg, cat, rdb, metrics, logger, func(server string) *catalog.ServerView { return views[server] })
	if err != nil {
		return nil, err
	}
	shared, err := sharedSessions(cfg, rdb)
	if err != nil {
		return nil, err
	}
	var remoteTasks tasks.RemoteRouter
	if ups != nil {
		remoteTasks = ups.RouteTask // an upstream's tasks pass through
	}
	deps := mcp.Deps{
		Transport: transport,
		Version:   version,
		Logger:    logger,
		Sealer:    sealer,
		// Tools that the policy guards stay hidden from callers without a
		// token (stdio, or auth off on loopback): fail closed.
		Policy:       policy,
		Rules:        rules,
		OnDenied:     toolDeniedHook(logger, metrics, "", cat.HasTool, nil, au),
		Middleware:   []sdk.Middleware{telemetry, au.toolCalls("", known, func(n string) string { return n }, cat.ToolFacts, nil)},
		LimitHook:    limitHook(logger, metrics, au),
		Tasks:        taskMgr,
		RemoteTasks:  remoteTasks,
		PrincipalKey: principalKey,
		StepUp:       stepUp(cfg.Auth, cfg.authOn()),
		// Legacy sessions shared between replicas, as
		// mcp.session_store says.
		SharedSessions:    shared,
		OnSessionAdopted:  metrics.SessionRebuilt,
		OnEventsReplayed:  metrics.EventsReplayed,
		OnAnswerForwarded: metrics.AnswerForwarded,
	}
	server := mcp.New(cat, cfg.MCP, deps)
	if transport == mcp.HTTP {
		if a.virtual, err = newVirtualServers(cfg, cat, deps, telemetryOpts, logger, au); err != nil {
			return nil, err
		}
		for _, v := range a.virtual {
			views[v.cfg.Name] = v.server.View()
			for _, name := range v.server.View().ToolNames() {
				if v.server.View().TaskSupport(name).Support != tasks.SupportNone {
					taskMetrics.Declare(v.cfg.Name, name)
				}
			}
		}
	}
	a.server, a.upstreams, a.tasks, a.redis = server, ups, taskMgr, rdb
	au.configLoaded(cfg)
	return a, nil
}

// virtualApp is one virtual server as the program serves it.
type virtualApp struct {
	cfg    *virtualServer
	server *mcp.Server
}

// newVirtualServers builds the servers of cfg.Servers on cat, each with
// root's deps but its own exposure, policy, title and instructions, and
// its own telemetry middleware (telemetry, naming the server and the
// tools by the names it exposes, with their root names). It checks each
// exposure against the catalog as built: what no source offers fails the
// start, with every problem at once, except what an upstream not listed
// yet may still offer, which is logged.
func newVirtualServers(cfg *configFile, cat *catalog.Catalog, root mcp.Deps, telemetry observability.MCPOptions, logger *slog.Logger, au *auditor) ([]*virtualApp, error) {
	upstreams := make([]string, 0, len(cfg.Upstreams))
	for _, u := range cfg.Upstreams {
		upstreams = append(upstreams, u.Name)
	}
	var (
		out      []*virtualApp
		problems []error
	)
	for i := range cfg.Servers {
		vs := &cfg.Servers[i]
		for _, p := range cat.CheckExposure(vs.Exposure, upstreams) {
			key := fmt.Sprintf("servers[%d].%s", i, p.Key)
			if p.Warning {
				logger.Warn("a virtual server names what its upstream does not offer yet", "key", key, "problem", p.Message)
				continue
			}
			problems = append(problems, fmt.Errorf("%s: %s", key, p.Message))
		}
		deps := root
		deps.Exposure = &vs.Exposure
		deps.Title = vs.Title
		deps.Instructions = vs.Instructions
		o := cfg.Auth
		o.Policy = vs.Auth.Policy
		deps.Policy = toolPolicy(o)
		deps.StepUp = nil
		if deps.Policy != nil {
			o.Resource, o.RequiredScopes = vs.Resource, vs.Auth.RequiredScopes
			deps.StepUp = stepUp(o, cfg.authOn())
		}
		var srv *mcp.Server // set before the server serves
		known := func(name string) bool { return srv.View().HasTool(name) }
		original := func(name string) string { return srv.View().Original(name) }
		facts := func(name string) (string, *sdk.ToolAnnotations, bool) { return srv.View().ToolFacts(name) }
		rules, err := newPolicyRules(fmt.Sprintf("servers[%d].auth.", i), vs.Auth.Policy, vs.Name, facts, original, logger)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		deps.Rules = rules
		tel := telemetry
		tel.Server = vs.Name
		tel.KnownTool, tel.OriginalTool = known, original
		curate := func(name string, args json.RawMessage) json.RawMessage {
			if t, ok := srv.View().Tool(name); ok && t.Curated() {
				if out, err := t.Arguments(args); err == nil {
					return out
				}
			}
			return args
		}
		deps.Middleware = append([]sdk.Middleware{observability.MCPMiddleware(tel), au.toolCalls(vs.Name, known, original, facts, curate)}, root.Middleware[2:]...)
		deps.Name = vs.Name
		if telemetry.Metrics != nil {
			deps.OnDenied = toolDeniedHook(logger, telemetry.Metrics, vs.Name, known, original, au)
			telemetry.Metrics.DeclareServer(vs.Name)
		}
		srv = mcp.New(cat, cfg.MCP, deps)
		out = append(out, &virtualApp{cfg: vs, server: srv})
	}
	if err := errors.Join(problems...); err != nil {
		return nil, fmt.Errorf("servers: %w", err)
	}
	return out, nil
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

// shutdownTracing flushes queued spans, bounded so that a collector that is
// down cannot hold the exit.
func (a *app) shutdownTracing() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.tracing.Shutdown(ctx); err != nil {
		a.logger.Warn("flushing spans at exit", "error", err)
	}
}

// stopUpstreams stops the upstream servers, if any.
func (a *app) stopUpstreams() {
	if a.upstreams != nil {
		_ = a.upstreams.Close()
	}
}
