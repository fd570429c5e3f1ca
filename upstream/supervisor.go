package upstream

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
)

// supervisor keeps an upstream's shared session: it connects (starting a
// stdio server) with its connector, serves until the session ends and
// reconnects with backoff (supervise.go), puts the upstream's lists in
// the catalog and follows their changes (sync.go), and keeps the
// callers' resource subscriptions on the session (subscriptions.go).
type supervisor struct {
	opts   Options
	prefix string
	cat    Catalog
	deps   Deps
	logger *slog.Logger
	fail   failures
	conn   *connector
	// serve makes the handlers of what the upstream offers, which sync
	// puts in the catalog with the lists.
	serve handlers

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

	// headerTools are the upstream tools whose input schemas bind
	// arguments to headers (a map[string]bool, replaced by each sync).
	headerTools atomic.Value
	// apps is whether the upstream serves MCP Apps, as its lists say
	// (apps.go); order is its place in the configuration.
	apps  atomic.Bool
	order int
}

// handlers make the handlers of what an upstream offers, for the
// catalog: the proxy's (call.go, prompts.go, resources.go,
// completion.go).
type handlers interface {
	// callTool and directTool return the handlers of the upstream tool
	// called name.
	callTool(name string) sdk.ToolHandler
	directTool(name string) catalog.DirectHandler
	// getPrompt returns the handler of the upstream prompt called name.
	getPrompt(name string) sdk.PromptHandler
	// readResource is the handler of the upstream's resources and
	// resource templates.
	readResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error)
	// complete is the handler of completions of its prompts and resource
	// templates.
	complete(ctx context.Context, req *sdk.CompleteRequest) (*sdk.CompleteResult, error)
}

func newSupervisor(o Options, cat Catalog, deps Deps, logger *slog.Logger, conn *connector, serve handlers) *supervisor {
	return &supervisor{
		opts:    o,
		prefix:  o.namespace(),
		cat:     cat,
		deps:    deps,
		logger:  logger,
		fail:    failures{name: o.Name, logger: logger},
		conn:    conn,
		serve:   serve,
		changes: make(chan struct{}, 1),
		broken:  make(chan struct{}, 1),
		subs:    map[string]int{},
	}
}

// signal wakes the receiver of c, if it is not woken already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// listChanged is called when the upstream says one of its lists changed.
func (s *supervisor) listChanged() { signal(s.changes) }

// session returns the shared session, or nil while there is none.
func (s *supervisor) session() *sdk.ClientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess
}

// ready reports whether the catalog holds the current session's lists.
func (s *supervisor) ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess != nil && s.synced
}

// setSession makes sess the shared session, its lists in the catalog or
// not (synced), and tells the Up hook when the upstream comes up or goes
// down.
func (s *supervisor) setSession(sess *sdk.ClientSession, synced bool) {
	s.mu.Lock()
	was := s.sess != nil && s.synced
	s.sess, s.synced = sess, synced
	now := s.sess != nil && s.synced
	s.mu.Unlock()
	if was != now && s.deps.Hooks.Up != nil {
		s.deps.Hooks.Up(s.opts.Name, now)
	}
}

// classify names the kind of a request's failure err on the session sess
// and, when the connection of the shared session broke, has it
// re-established. (A caller's own per_principal process is replaced when
// it exits.)
func (s *supervisor) classify(ctx context.Context, sess *sdk.ClientSession, err error) string {
	kind := kindOf(ctx, err)
	if kind == KindTransport && sess == s.session() && !streamEnded(err) {
		signal(s.broken)
	}
	return kind
}

// headerBound reports whether the input schema of the upstream tool
// called name binds arguments to headers (x-mcp-header), as of the last
// sync: its calls take the SDK client, which writes them.
func (s *supervisor) headerBound(name string) bool {
	bound, _ := s.headerTools.Load().(map[string]bool)
	return bound[name]
}
