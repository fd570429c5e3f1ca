package portcullis

import (
	"net/http"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/authserver"
	"github.com/portcullis-mcp/portcullis/internal/connect"
	"github.com/portcullis-mcp/portcullis/mcp"
	"github.com/portcullis-mcp/portcullis/observability"
)

// chainParts are the pieces buildHandler puts in order.
type chainParts struct {
	bodyDeadline func(http.Handler) http.Handler
	mcp          *mcp.Handler
	auth         func(http.Handler) http.Handler
	refusals     func(http.Handler) http.Handler
	limits       func(http.Handler) http.Handler
	health       *observability.Health
	dev          *devIssuer         // nil unless --dev
	authServer   *authserver.Server // nil unless authorization_server.enabled
	connections  *connect.Service   // nil unless an upstream acts as each user
	virtual      []virtualRoute     // the virtual servers (servers)
}

// virtualRoute is what a virtual server's chain is built from: the same
// steps as /mcp's, with the server's own handler, auth (its resource and
// scopes), limits and metadata.
type virtualRoute struct {
	name     string // the server's name, its metrics' portcullis_server
	path     string
	mcp      *mcp.Handler
	auth     func(http.Handler) http.Handler
	refusals func(http.Handler) http.Handler
	limits   func(http.Handler) http.Handler
	metadata http.Handler // nil with auth off
	resource string
}

// buildHandler returns the MCP listener's handler: every route behind the
// body deadline and recover, /mcp through buildMCPChain and the routes
// that need no token through buildPublicChain. The order, and what each
// step does, is described once, in docs/architecture.md#the-request-path:
// keep it true when this changes. The metrics listener has its own server
// (see metricsServer).
func (a *app) buildHandler(p chainParts) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(mcpPath, a.buildMCPChain(p))
	mux.Handle("GET /healthz", a.buildPublicChain("healthz", http.HandlerFunc(p.health.ServeLive)))
	mux.Handle("GET /readyz", a.buildPublicChain("readyz", http.HandlerFunc(p.health.ServeReady)))
	if a.cfg.Auth.Enabled() {
		// RFC 9728: the bare well-known path and the one suffixed with the
		// resource's path; both public, with CORS open to every origin (see
		// auth.MetadataHandler), so a preflight is never a 404.
		meta := a.buildPublicChain("metadata", auth.MetadataHandler(a.cfg.Auth))
		paths := []string{auth.MetadataWellKnown}
		if path := auth.MetadataPath(a.cfg.Auth.Resource); path != auth.MetadataWellKnown {
			paths = append(paths, path)
		}
		for _, path := range paths {
			mux.Handle("GET "+path, meta)
			mux.Handle("OPTIONS "+path, meta)
		}
	}
	for _, v := range p.virtual {
		vp := p
		vp.mcp, vp.auth, vp.refusals, vp.limits = v.mcp, v.auth, v.refusals, v.limits
		mux.Handle(v.path, a.buildChain(vp, v.name, v.path))
		if v.metadata != nil {
			meta := a.buildPublicChain("metadata", v.metadata)
			path := auth.MetadataPath(v.resource)
			mux.Handle("GET "+path, meta)
			mux.Handle("OPTIONS "+path, meta)
		}
	}
	if p.dev != nil {
		mux.Handle(devIssuerPath+"/", a.buildPublicChain("dev_issuer", p.dev.Handler()))
	}
	if p.authServer != nil {
		as := a.buildPublicChain("authorization_server", observability.AccessLog(a.logger, p.authServer.Handler()))
		for _, path := range p.authServer.Paths() {
			mux.Handle(path, as)
		}
	}
	if p.connections != nil {
		c := a.buildPublicChain("connections", observability.AccessLog(a.logger, p.connections.Handler()))
		mux.Handle(connect.PathPrefix, c)
		mux.Handle(connect.PathPrefix+"/", c)
	}
	mux.Handle("/", a.buildPublicChain("other", http.NotFoundHandler()))
	return p.bodyDeadline(observability.Recover(a.logger, mux))
}

// buildMCPChain returns /mcp's chain: telemetry, access log, origin check,
// auth, refusals, limits, the MCP handler. Auth failures and refusals by a limit are
// therefore counted, traced and logged like any other response.
func (a *app) buildMCPChain(p chainParts) http.Handler {
	return a.buildChain(p, "", mcpPath)
}

// buildChain returns the chain of an MCP endpoint at path (/mcp or a
// virtual server's) from p's parts; server names the virtual server, empty
// for /mcp. Every MCP endpoint's requests are counted under the route
// "mcp", each with its server's portcullis_server.
func (a *app) buildChain(p chainParts, server, path string) http.Handler {
	var h http.Handler = p.mcp
	h = p.limits(h)
	h = p.refusals(h)
	h = p.auth(h)
	h = p.mcp.OriginGuard(h)
	h = observability.AccessLog(a.logger, h)
	return a.inst().MCPRoute(server, path, h)
}

// buildPublicChain returns the chain of a route that needs no token: route
// metrics under name (a fixed label, never the raw path), then h.
func (a *app) buildPublicChain(name string, h http.Handler) http.Handler {
	return a.inst().Route(name, h)
}

// inst is the HTTP instrumentation of the app's metrics and tracer.
func (a *app) inst() observability.HTTP {
	return observability.HTTP{Metrics: a.metrics, Tracing: a.tracing}
}
