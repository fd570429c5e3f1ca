package upstream

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// upstream is one configured upstream server and its current session.
type upstream struct {
	opts   Options
	prefix string
	cat    Catalog
	deps   Deps
	logger *slog.Logger
	client *sdk.Client
	// pool runs the callers' processes of a per_principal upstream; nil
	// for a shared one.
	pool *pool
	// dialFn opens a connection; dial, except in tests.
	dialFn func() (sdk.Transport, func(), error)
	// dialEnvFn opens a connection to a new stdio process with env added
	// to its environment (pass_principal: env).
	dialEnvFn func(env []string) (sdk.Transport, func(), error)
	// now is the clock of the exchanged tokens' expiry.
	now func() time.Time
	// sessionOpts are the client session's options: nil (the latest
	// protocol version), except in tests.
	sessionOpts *sdk.ClientSessionOptions

	mu   sync.Mutex
	sess *sdk.ClientSession
	// synced is whether the catalog holds the current session's lists.
	synced bool

	// changes is signalled by list_changed notifications; broken by calls
	// that found the connection broken.
	changes chan struct{}
	broken  chan struct{}

	// subs counts the callers' subscriptions to each of the upstream's
	// resources: the upstream is subscribed while the count is positive,
	// and again after each reconnect.
	subsMu sync.Mutex
	subs   map[string]int

	// relay passes on what the upstream sends besides its answers.
	relay *relay

	// links holds the open sessions and their senders; headerTools the
	// upstream tools whose calls cannot take a direct hop (a
	// map[string]bool, replaced by each sync).
	links       *links
	headerTools atomic.Value
}

func newUpstream(o Options, cat Catalog, deps Deps) (*upstream, error) {
	u := &upstream{
		opts:    o,
		prefix:  o.namespace(),
		cat:     cat,
		deps:    deps,
		logger:  deps.Logger.With("upstream", o.Name),
		changes: make(chan struct{}, 1),
		subs:    map[string]int{},
		broken:  make(chan struct{}, 1),
	}
	u.relay = &relay{
		name:    o.Name,
		logger:  u.logger,
		changed: u.changed,
		updated: func(ctx context.Context, uri string) { u.cat.ResourceUpdated(ctx, uri) },
	}
	u.links = &links{inflight: &u.relay.inflight}
	u.client = newClient(u.impl(), u.logger, u.relay, u.links)
	u.dialFn = u.dial
	u.now = time.Now
	u.dialEnvFn = u.dialStdioEnv
	return u, nil
}

// impl is the client Portcullis names itself to upstreams.
func (u *upstream) impl() *sdk.Implementation {
	return &sdk.Implementation{Name: "portcullis", Version: u.deps.Version}
}

// changed is called when the upstream says one of its lists changed.
func (u *upstream) changed() { signal(u.changes) }

// session returns the shared session, or nil while there is none.
func (u *upstream) session() *sdk.ClientSession {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sess
}

// ready reports whether the catalog holds the current session's lists.
func (u *upstream) ready() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sess != nil && u.synced
}

// setSession makes s the shared session, its lists in the catalog or not
// (synced), and tells the Up hook when the upstream comes up or goes down.
func (u *upstream) setSession(s *sdk.ClientSession, synced bool) {
	u.mu.Lock()
	was := u.sess != nil && u.synced
	u.sess, u.synced = s, synced
	now := u.sess != nil && u.synced
	u.mu.Unlock()
	if was != now && u.deps.Hooks.Up != nil {
		u.deps.Hooks.Up(u.opts.Name, now)
	}
}

// signal wakes the receiver of c, if it is not woken already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
