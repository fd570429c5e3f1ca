package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Manager runs the upstream MCP servers of the configuration and keeps
// what they offer in a [catalog.Catalog]: build it with [New], start it with
// [Manager.Start], stop it with [Manager.Close].
type Manager struct {
	ups  []*proxy
	deps Deps
	// elicits are the URL elicitations this replica's sessions got.
	elicits *elicitations

	wg     sync.WaitGroup
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
}

// New returns a Manager for the upstreams of list, which put what they
// offer into cat. list should have passed [Validate]; New checks it again
// and reads the files it names.
func New(list []Options, cat Catalog, deps Deps) (*Manager, error) {
	if err := Validate(list); err != nil {
		return nil, fmt.Errorf("upstream: upstreams%w", err)
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.HTTPClient == nil {
		deps.HTTPClient = DefaultHTTPClient()
	}
	if deps.Backoff == nil {
		deps.Backoff = DefaultBackoff
	}
	if deps.Version == "" {
		deps.Version = "dev"
	}
	m := &Manager{deps: deps, elicits: &elicitations{}}
	// Servers built from the catalog from now on route completions and
	// resource subscriptions for upstreams' prompts, templates and
	// resources to their upstream.
	if fc, ok := cat.(interface{ ForwardToSources() }); ok && len(list) > 0 {
		fc.ForwardToSources()
	}
	for i, o := range list {
		o.Defaults()
		p := newProxy(o, i, cat, deps)
		p.elicits = m.elicits
		m.ups = append(m.ups, p)
	}
	return m, nil
}

// Start connects to every upstream in the background and keeps each
// connected (restarting stdio servers) until [Manager.Close].
func (m *Manager) Start(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.cancel != nil {
		return
	}
	ctx, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for _, u := range m.ups {
		if u.opts.Isolation == IsolationPerPrincipal {
			u.pool = newPool(ctx, u.conn)
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				<-ctx.Done()
				u.pool.wait()
			}()
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			u.sup.run(ctx)
		}()
	}
}

// Close disconnects every upstream, stops the stdio servers (stdin closed,
// then SIGTERM, then SIGKILL, each after the upstream's stop_grace) and
// returns when all is stopped.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	cancel := m.cancel
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	m.wg.Wait()
	return nil
}

// Ready returns nil when every required upstream is connected and its
// tools are in the catalog, and otherwise an error naming those that are
// not.
func (m *Manager) Ready(context.Context) error {
	var down []string
	for _, u := range m.ups {
		if u.opts.Required && !u.sup.ready() {
			down = append(down, u.opts.Name)
		}
	}
	if len(down) > 0 {
		return fmt.Errorf("upstream: not connected: %s", strings.Join(down, ", "))
	}
	return nil
}

// Required reports whether any upstream is required, that is whether
// [Manager.Ready] can fail.
func (m *Manager) Required() bool {
	for _, u := range m.ups {
		if u.opts.Required {
			return true
		}
	}
	return false
}

// ElicitationComplete tells the session that got the URL elicitation id,
// if it is on this replica and still open, that it was completed: the
// client retries the call. It reports whether a session was told.
func (m *Manager) ElicitationComplete(ctx context.Context, id string) bool {
	ss, ok := m.elicits.take(nil, id)
	if !ok {
		return false
	}
	return ss.NotifyElicitationComplete(ctx, &sdk.ElicitationCompleteParams{ElicitationID: id}) == nil
}
