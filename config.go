package portcullis

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/audit"
	"github.com/portcullis-mcp/portcullis/internal/authserver"
	"github.com/portcullis-mcp/portcullis/internal/curation"
	"github.com/portcullis-mcp/portcullis/internal/httptools"
	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/loopback"
	"github.com/portcullis-mcp/portcullis/internal/redisconn"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
	"github.com/portcullis-mcp/portcullis/mcp"
	"github.com/portcullis-mcp/portcullis/observability"
	"github.com/portcullis-mcp/portcullis/tasks"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// envPrefix starts every environment variable that sets a config key.
const envPrefix = "PORTCULLIS_"

// configFile is the whole configuration file. Each package owns its section.
//
// The config part of the Helm chart's values.schema.json is generated from
// these types and their doc comments: after changing a key, run
// `go generate .` (make generate) and commit the result.
//
//go:generate go test -run ^(TestGenerateChartSchema|TestConfigReference)$ -count=1 . -args -update
type configFile struct {
	// Server configures the listeners and how the server stops.
	Server serverOptions `yaml:"server"`
	// MCP configures the MCP endpoint: sessions, request limits, timeouts.
	MCP mcp.Options `yaml:"mcp"`
	// Tools selects the toolsets and declares resources and prompts.
	Tools toolsets.Options `yaml:"tools"`
	// Auth configures how bearer tokens are verified and what they grant.
	Auth auth.Options `yaml:"auth"`
	// AuthorizationServer makes Portcullis the OAuth 2.1 authorization
	// server its Protected Resource Metadata names, in front of the
	// organisation's identity provider: for providers MCP clients cannot
	// sign in with directly (no dynamic registration, no RFC 8707
	// resource). Off by default.
	AuthorizationServer authserver.Options `yaml:"authorization_server"`
	// Limits bounds the requests served at once and per caller.
	Limits limits.Options `yaml:"limits"`
	// Log configures the structured log on stderr.
	Log logOptions `yaml:"log"`
	// Telemetry says what traces may record about callers.
	Telemetry observability.TelemetryOptions `yaml:"telemetry"`
	// Upstreams are MCP servers (stdio child processes or Streamable HTTP
	// endpoints) whose tools, resources and prompts Portcullis serves
	// behind its own auth, policy, limits and telemetry.
	Upstreams []upstream.Options `yaml:"upstreams"`
	// HTTPAPIs are REST APIs whose declared tools Portcullis serves, each
	// call one HTTP request with the API's own credential (never the
	// caller's token), behind Portcullis's auth, policy, limits and
	// telemetry. See docs/http-tools.md.
	HTTPAPIs []httptools.Options `yaml:"http_apis"`
	// Connections keeps the accounts users connect at upstreams that act
	// as each user (upstreams[].oauth.grant authorization_code): the
	// vault's keys and how long an unused account is kept.
	Connections connectionsOptions `yaml:"connections"`
	// Tasks configures long-running tool calls (the MCP tasks extension):
	// where tasks live, how long they run and are kept, and the caps.
	Tasks tasks.Options `yaml:"tasks"`
	// Redis is the Redis that replicas share: the task store with
	// tasks.store redis, and the per-caller rate limits. Empty url: none.
	Redis redisconn.Options `yaml:"redis"`
	// Servers are virtual MCP servers on the MCP listener besides the root
	// server at /mcp: each at its own path with its own resource (token
	// audience), exposing the tools, resources and prompts it selects from
	// the built-in toolsets, the program's tools and the upstreams,
	// renamed and described for its users, with its own policy and limits.
	// One connector per team on one Portcullis; see docs/servers.md.
	Servers []virtualServer `yaml:"servers"`
	// Audit sends audit events (tool calls, refusals, sign-ins, tokens,
	// configuration) of a versioned schema to sinks: JSON lines on
	// stderr or in a file, syslog, OpenTelemetry logs. See
	// docs/security.md. Off by default: the log's audit line of each
	// tool call stays either way.
	Audit audit.Options `yaml:"audit"`
}

// serverOptions configures the HTTP listener and its lifecycle.
type serverOptions struct {
	// Listen is the address of the MCP listener. Default 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// MetricsListen is the address of the separate /metrics listener.
	// Default 127.0.0.1:9090.
	MetricsListen string `yaml:"metrics_listen"`
	// AllowPprof serves Go's runtime profiles (net/http/pprof) under
	// /debug/pprof/ on the metrics listener, never on the MCP one. Off by
	// default: a profile shows the program's internals (function names,
	// goroutine stacks, allocation sites), and a CPU profile or trace costs
	// the server while it runs, so turn it on only where the metrics
	// listener is reachable by operators alone.
	AllowPprof bool `yaml:"allow_pprof"`
	// ReadHeaderTimeout bounds reading request headers. Default 10s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadBodyTimeout bounds reading a request body, from the end of its
	// headers: a body still incomplete then gets 408 (or, if its handler
	// did not read it, the connection is closed) and is counted as
	// limit="body_read_timeout". A request auth refuses does not wait for
	// its body: its 401 comes at once, with Connection: close. Responses,
	// SSE streams among them, are not bounded. Default 30s.
	ReadBodyTimeout time.Duration `yaml:"read_body_timeout"`
	// IdleTimeout closes idle keep-alive connections. Default 120s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxHeaderBytes bounds request headers. Default 64 KiB.
	MaxHeaderBytes int `yaml:"max_header_bytes" schema:"min=0"`
	// DrainDelay is how long readiness fails before the listener closes on
	// SIGTERM, so load balancers stop routing first. Unset means 5s, what
	// the Helm chart sets too: Kubernetes takes a deleted pod out of its
	// Service's endpoints at once, but kube-proxy on each node and ingress
	// controllers apply that a few seconds later, and until then they
	// still send connections, which a closed listener refuses. A balancer
	// that checks /readyz itself stops routing after its check interval
	// times its failure threshold: set drain_delay above that. 0s closes
	// the listener at once. With --dev (loopback only, no balancer), unset
	// means 0s.
	DrainDelay *time.Duration `yaml:"drain_delay"`
	// ShutdownGrace bounds how long calls in flight may take to finish
	// once the listener has closed. Default 20s, so that drain_delay's
	// default 5s and this end within Kubernetes' default 30s grace period
	// (terminationGracePeriodSeconds) with time to spare: the kubelet kills
	// the process when that runs out, cutting off what is still running.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
}

// The defaults of server.drain_delay (outside --dev) and
// server.shutdown_grace. The chart's portcullis.validate assumes them for
// keys left unset.
const (
	defaultDrainDelay    = 5 * time.Second
	defaultShutdownGrace = 20 * time.Second
)

// drainDelay returns DrainDelay, or its default when it is unset.
func (s serverOptions) drainDelay() time.Duration {
	if s.DrainDelay == nil {
		return defaultDrainDelay
	}
	return *s.DrainDelay
}

// logOptions configures the structured log on stderr.
type logOptions struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level" schema:"enum=debug|info|warn|error"`
}

func (c *configFile) defaults() {
	c.Audit.Defaults()
	s := &c.Server
	if s.Listen == "" {
		s.Listen = "127.0.0.1:8080"
	}
	if s.MetricsListen == "" {
		s.MetricsListen = "127.0.0.1:9090"
	}
	if s.ReadHeaderTimeout == 0 {
		s.ReadHeaderTimeout = 10 * time.Second
	}
	if s.ReadBodyTimeout == 0 {
		s.ReadBodyTimeout = limits.DefaultReadBodyTimeout
	}
	if s.IdleTimeout == 0 {
		s.IdleTimeout = 120 * time.Second
	}
	if s.MaxHeaderBytes == 0 {
		s.MaxHeaderBytes = 64 << 10
	}
	if s.DrainDelay == nil {
		d := defaultDrainDelay
		s.DrainDelay = &d
	}
	if s.ShutdownGrace == 0 {
		s.ShutdownGrace = defaultShutdownGrace
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	c.MCP.Defaults()
	c.Tools.Defaults()
	c.Auth.Defaults()
	c.AuthorizationServer.Defaults(c.Auth.Resource)
	c.Limits.Defaults()
	c.Redis.Defaults()
	for i := range c.HTTPAPIs {
		c.HTTPAPIs[i].Defaults()
	}
	for i := range c.Servers {
		c.Servers[i].defaults(c.Auth.Resource, c.Limits.RatePerPrincipal, c.Limits.BurstPerPrincipal)
	}
}

// defaultServerResources sets each virtual server's unset resource from
// auth.resource. serve --dev calls it again once it has set
// auth.resource.
func (c *configFile) defaultServerResources() {
	for i := range c.Servers {
		c.Servers[i].defaultResource(c.Auth.Resource)
	}
}

// Validate reports every problem at once, each naming its key.
func (c *configFile) Validate() error {
	var errs []error
	add := func(prefix string, err error) {
		for _, e := range unjoin(err) {
			errs = append(errs, fmt.Errorf("%s%w", prefix, e))
		}
	}
	s := c.Server
	if err := checkAddr(s.Listen); err != nil {
		add("server.listen: ", err)
	} else if !loopback.Host(s.Listen) && !c.authOn() && !c.Auth.InsecureAllowUnauthenticated {
		add("server.listen: ", fmt.Errorf("%q is not a loopback address: configure auth.issuers or auth.introspection, or set auth.insecure_allow_unauthenticated (never in production); without auth Portcullis serves only on loopback (127.0.0.1, [::1], localhost)", s.Listen))
	}
	if c.authOn() && c.Auth.Resource != "" {
		if u, err := url.Parse(c.Auth.Resource); err == nil && u.Path != mcpPath {
			add("auth.resource: ", fmt.Errorf("%q must name the served MCP endpoint, whose path is %s", c.Auth.Resource, mcpPath))
		}
	}
	if err := checkAddr(s.MetricsListen); err != nil {
		add("server.metrics_listen: ", err)
	}
	for key, d := range map[string]time.Duration{
		"server.read_header_timeout": s.ReadHeaderTimeout,
		"server.read_body_timeout":   s.ReadBodyTimeout,
		"server.idle_timeout":        s.IdleTimeout,
		"server.shutdown_grace":      s.ShutdownGrace,
	} {
		if d <= 0 {
			add(key+": ", errors.New("must be positive"))
		}
	}
	if s.drainDelay() < 0 {
		add("server.drain_delay: ", errors.New("must not be negative"))
	}
	if s.MaxHeaderBytes < 0 {
		add("server.max_header_bytes: ", errors.New("must not be negative"))
	}
	if !observability.ValidLogLevel(c.Log.Level) {
		add("log.level: ", fmt.Errorf("%q: want debug, info, warn or error", c.Log.Level))
	}
	add("mcp.", c.MCP.Validate())
	add("tools.", c.Tools.Validate())
	add("upstreams", upstream.Validate(c.Upstreams))
	add("http_apis", validateHTTPAPIs(c.HTTPAPIs, c.Upstreams))
	add("auth.", c.authForValidation().Validate())
	if _, err := compileRules("auth.", c.Auth.Policy); err != nil {
		add("", err)
	}
	add("authorization_server.", c.AuthorizationServer.Validate(c.Auth.Resource))
	add("limits.", c.Limits.Validate())
	add("tasks.", c.Tasks.Validate())
	add("redis.", c.Redis.Validate())
	add("audit.", c.Audit.Validate())
	add("", c.Connections.validate(connectionUpstreams(c.Upstreams, c.HTTPAPIs), c.AuthorizationServer.Enabled, c.issuerNames()))
	add("", validateServers(c.Servers, c.Auth.Resource, c.selectionSources()))
	for i := range c.Servers {
		c.validateServerSections(i, add)
	}
	if c.Tasks.Store == "redis" && !c.Redis.Enabled() {
		errs = append(errs, errors.New("tasks.store: redis needs a Redis every replica shares (redis.url, redis.sentinel.master_name or redis.cluster.addresses)"))
	}
	return errors.Join(errs...)
}

// builtinToolsets are the toolsets a selection's source may name.
var builtinToolsets = []string{toolsets.ToolsetCore, toolsets.ToolsetWorkshop, toolsets.ToolsetConformance}

// selectionSources are the sources the virtual servers' selections may
// name: the built-in toolsets enabled in tools.toolsets, the declared
// resources and prompts, the program's, the upstreams and the HTTP APIs
// (the first of each name: a second is their sections' problem).
func (c *configFile) selectionSources() curation.Sources {
	s := curation.Sources{Toolsets: builtinToolsets, Enabled: c.Tools.Toolsets, Upstreams: map[string]func(string) string{}}
	for i := range c.Upstreams {
		if _, dup := s.Upstreams[c.Upstreams[i].Name]; !dup {
			s.Upstreams[c.Upstreams[i].Name] = c.Upstreams[i].ServedName
		}
	}
	for i := range c.HTTPAPIs {
		if _, dup := s.Upstreams[c.HTTPAPIs[i].Name]; !dup {
			s.Upstreams[c.HTTPAPIs[i].Name] = c.HTTPAPIs[i].ServedName
		}
	}
	return s
}

// issuerNames are the issuers of auth.issuers.
func (c *configFile) issuerNames() []string {
	var out []string
	for _, i := range c.Auth.Issuers {
		out = append(out, i.Issuer)
	}
	return out
}

// validateServerSections reports, through add, the problems of the
// auth and limits of the virtual server servers[i], by the rules of the
// auth and limits sections; a problem of its resource, which the auth
// rules check too, under servers[i].resource.
func (c *configFile) validateServerSections(i int, add func(prefix string, err error)) {
	s := &c.Servers[i]
	for _, err := range unjoin(c.serverAuth(s).Validate()) {
		section := "auth."
		if strings.HasPrefix(err.Error(), "resource:") {
			section = ""
		}
		add(fmt.Sprintf("servers[%d].%s", i, section), err)
	}
	if _, err := compileRules(fmt.Sprintf("servers[%d].auth.", i), s.Auth.Policy); err != nil {
		add("", err)
	}
	lim := limits.Options{RatePerPrincipal: s.Limits.RatePerPrincipal, BurstPerPrincipal: s.Limits.BurstPerPrincipal}
	add(fmt.Sprintf("servers[%d].limits.", i), lim.Validate())
}

// serverAuth returns the auth options that validate the server's resource,
// required scopes and policy by the rules of auth.resource,
// auth.required_scopes and auth.policy. With auth on, a stand-in issuer
// stands for the configured ones, whose problems the auth section reports.
func (c *configFile) serverAuth(s *virtualServer) *auth.Options {
	o := &auth.Options{Resource: s.Resource, RequiredScopes: s.Auth.RequiredScopes, Policy: s.Auth.Policy}
	if c.authForValidation().Enabled() {
		o.Issuers = []auth.IssuerOptions{{Issuer: "https://issuer.invalid"}}
		if s.Resource == "" {
			// auth.resource is missing or not a URL, and reported so.
			o.Resource = "https://resource.invalid" + s.Path
		}
	}
	return o
}

// serverNames returns the names of the configured virtual servers.
func serverNames(cfg *configFile) []string {
	names := make([]string, 0, len(cfg.Servers))
	for _, s := range cfg.Servers {
		names = append(names, s.Name)
	}
	return names
}

// authForValidation is the auth section as serving will use it: with
// authorization_server on and no other issuer, setupAuthServer makes the
// authorization server the one issuer, so auth.required_scopes and the
// other settings that need an issuer are valid without auth.issuers.
func (c *configFile) authForValidation() *auth.Options {
	o := c.Auth
	if c.AuthorizationServer.Enabled && !o.Enabled() && c.AuthorizationServer.Issuer != "" {
		o.Issuers = []auth.IssuerOptions{{Issuer: c.AuthorizationServer.Issuer, AllowHTTP: true}}
	}
	return &o
}

// authOn reports whether /mcp needs a token: issuers or introspection are
// configured, or Portcullis issues the tokens itself.
func (c *configFile) authOn() bool {
	return c.Auth.Enabled() || c.AuthorizationServer.Enabled
}

// unjoin flattens an errors.Join tree into its leaves.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}

func checkAddr(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	return nil
}
