package upstream

import (
	"context"

	"github.com/portcullis-mcp/portcullis/internal/mcpapps"
)

// proxy is one configured upstream server as its callers reach it. Its
// handlers, which the supervisor puts in the catalog (call.go,
// prompts.go, resources.go, completion.go), send each caller's request to
// a session of the upstream — the shared one the supervisor keeps, or
// the caller's own from the pool — by one of the session's senders
// (sender.go); the relay passes on what the upstream sends besides its
// answers.
type proxy struct {
	opts   Options
	prefix string
	deps   Deps
	fail   failures
	relay  *relay
	conn   *connector
	sup    *supervisor
	// pool runs the callers' processes of a per_principal upstream; nil
	// for a shared one.
	pool *pool
	// elicits are the URL elicitations sent for connected accounts.
	elicits *elicitations
}

func newProxy(o Options, order int, cat Catalog, deps Deps) *proxy {
	logger := deps.Logger.With("upstream", o.Name)
	p := &proxy{opts: o, prefix: o.namespace(), deps: deps, fail: failures{name: o.Name, logger: logger}}
	p.relay = &relay{
		name:    o.Name,
		logger:  logger,
		changed: func() { p.sup.listChanged() },
		updated: func(ctx context.Context, uri string) { cat.ResourceUpdated(ctx, mcpapps.Served(p.prefix, uri)) },
	}
	p.conn = newConnector(o, deps, logger, p.relay)
	p.sup = newSupervisor(o, cat, deps, logger, p.conn, p)
	p.sup.order = order
	return p
}
