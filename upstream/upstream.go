package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/mcpname"
	"github.com/portcullis-mcp/portcullis/internal/tokenexchange"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// connectTimeout bounds starting a connection: the process start or HTTP
// round trip, and the initialize handshake.
const connectTimeout = 30 * time.Second

// listTimeout bounds reading the upstream's lists after a connect or a
// list_changed notification.
const listTimeout = 30 * time.Second

// progressGrace is how long after a call's result its progress
// notifications are still passed on.
const progressGrace = 2 * time.Second

// maxListed bounds the items read from one list, across its pages: an
// upstream that pages forever (or loops its cursors) is cut off there.
const maxListed = 10_000

// maxPages bounds the pages read from one list.
const maxPages = 1_000

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

	// progress maps the progress tokens sent upstream to the callers'.
	progress  sync.Map // string → progressTarget
	nextToken atomic.Uint64

	// notes counts each session's progress and log notifications, so that
	// a call's result waits for those that came before it.
	notes sync.Map // *sdk.ClientSession → *notes

	// inflight names the caller of each call in flight, for the
	// upstream's requests and log messages during it (relay.go).
	inflight inflight

	// elicitations are the URL-mode elicitations passed to callers that
	// await completion (relay.go).
	elicitations elicitations

	// hops holds the direct hop of each session whose calls take it
	// (hop.go); headerTools the upstream tools they cannot (a
	// map[string]bool, replaced by each sync).
	hops        sync.Map // *sdk.ClientSession → *hop
	headerTools atomic.Value
}

type progressTarget struct {
	// ctx is the caller's request context: a notification sent with it
	// travels on the caller's call (its POST stream, the only one a
	// 2026-07-28 caller has).
	ctx     context.Context
	session *sdk.ServerSession
	token   any
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
	u.client = newClient(u)
	u.dialFn = u.dial
	u.now = time.Now
	u.dialEnvFn = u.dialStdioEnv
	return u, nil
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// impl is the client Portcullis names itself to upstreams.
func (u *upstream) impl() *sdk.Implementation {
	return &sdk.Implementation{Name: "portcullis", Version: u.deps.Version}
}

// changed is called when the upstream says one of its lists changed.
func (u *upstream) changed() { signal(u.changes) }

func (u *upstream) session() *sdk.ClientSession {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sess
}

func (u *upstream) ready() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sess != nil && u.synced
}

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

// run keeps the upstream connected until ctx is done, reconnecting with
// backoff after each failure.
func (u *upstream) run(ctx context.Context) {
	if u.deps.Hooks.Up != nil {
		u.deps.Hooks.Up(u.opts.Name, false)
	}
	attempt := 0
	for {
		start := time.Now()
		err := u.connectAndServe(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) >= healthyRun {
			attempt = 0
		}
		d := u.deps.Backoff(attempt)
		attempt++
		u.logger.Warn("upstream: disconnected; reconnecting", "error", err, "retry_in", d.String(), "attempt", attempt)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if u.deps.Hooks.Restarted != nil {
			u.deps.Hooks.Restarted(u.opts.Name)
		}
	}
}

// connectAndServe connects, puts the upstream's lists in the catalog and
// serves until the session ends or ctx is done.
func (u *upstream) connectAndServe(ctx context.Context) error {
	t, stop, err := u.dialFn()
	defer stop()
	if err != nil {
		return err
	}
	kt := newKeptTransport(t)
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	sess, err := u.client.Connect(cctx, kt, u.sessionOpts)
	cancel()
	if err != nil {
		kt.close()
		return fmt.Errorf("upstream: %s: connecting: %w", u.opts.Name, err)
	}
	u.notes.Store(sess, kt.notes)
	defer u.notes.Delete(sess)
	if h := newHop(t, sess, u.impl()); h != nil {
		u.hops.Store(sess, h)
		defer u.hops.Delete(sess)
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	defer func() {
		u.setSession(nil, false)
		// The session's Close waits for the calls in flight, which an
		// upstream that stopped answering never ends: the connection is
		// closed first, so that they end now with a transport error.
		kt.close()
		_ = sess.Close()
		<-done
	}()
	// Drop a list_changed signal from the previous session: the lists are
	// read now anyway.
	select {
	case <-u.changes:
	default:
	}
	select {
	case <-u.broken:
	default:
	}
	u.setSession(sess, false)
	u.logger.Info("upstream: connected", "protocol_version", protocolVersion(sess))
	// The log level is set before the tools are in the catalog: a call
	// that arrives as soon as they are would otherwise run on a session
	// whose server drops its log messages.
	u.setLogLevel(ctx, sess)
	// A clash keeps the session, not ready, until a list_changed fixes it:
	// reconnecting would not change the names.
	if err := u.sync(ctx, sess); err == nil {
		u.setSession(sess, true)
	} else if !errors.Is(err, catalog.ErrClash) {
		return err
	}
	u.resubscribe(ctx, sess)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-done:
			done <- err // for the deferred wait
			if err == nil {
				err = errors.New("connection closed")
			}
			return fmt.Errorf("upstream: %s: session ended: %w", u.opts.Name, err)
		case <-u.broken:
			return fmt.Errorf("upstream: %s: the connection broke during a call", u.opts.Name)
		case <-u.changes:
			if err := u.sync(ctx, sess); err != nil {
				if errors.Is(err, catalog.ErrClash) {
					u.setSession(sess, false)
					continue
				}
				return err
			}
			u.setSession(sess, true)
		}
	}
}

// keptTransport keeps the connection its Transport opened, so that a
// session can be ended without waiting for its calls in flight.
// It also holds the count of notifications read from the connection, for
// notes.
type keptTransport struct {
	sdk.Transport
	mu    sync.Mutex
	conn  sdk.Connection
	notes *notes
}

func newKeptTransport(t sdk.Transport) *keptTransport {
	kt := &keptTransport{Transport: t, notes: &notes{}}
	if st, ok := t.(*sdk.StreamableClientTransport); ok && st.HTTPClient != nil {
		if c, ok := st.HTTPClient.Transport.(*sseCounter); ok {
			kt.notes = c.notes
		}
	}
	return kt
}

func (t *keptTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.conn = conn
	t.mu.Unlock()
	// The SDK's Streamable HTTP connection has unexported methods that a
	// wrapper would hide (the negotiated protocol version reaches its
	// headers through one): its notifications are counted as its HTTP
	// responses are read (sseCounter).
	if _, ok := t.Transport.(*sdk.StreamableClientTransport); ok {
		return conn, nil
	}
	return &countingConn{Connection: conn, notes: t.notes}, nil
}

// close closes the connection, if one was opened. Every call waiting on it
// is answered with the connection's error.
func (t *keptTransport) close() {
	t.mu.Lock()
	conn := t.conn
	t.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

func protocolVersion(s *sdk.ClientSession) string {
	if r := s.InitializeResult(); r != nil {
		return r.ProtocolVersion
	}
	return ""
}

// sync reads the upstream's lists and puts them in the catalog. A clash
// leaves the catalog as it was and is logged as an error.
func (u *upstream) sync(ctx context.Context, sess *sdk.ClientSession) error {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	set, err := u.list(ctx, sess)
	if err != nil {
		return fmt.Errorf("upstream: %s: listing: %w", u.opts.Name, err)
	}
	bound := map[string]bool{}
	for _, t := range set.Tools {
		if in, _ := t.Tool.InputSchema.(json.RawMessage); hasHeaderBindings(in) {
			name := t.Tool.Name
			if u.prefix != "" {
				name = strings.TrimPrefix(name, u.prefix+"_")
			}
			bound[name] = true
		}
	}
	u.headerTools.Store(bound)
	skipped, err := u.setSource(set)
	if err != nil {
		u.logger.Error("upstream: its tools, resources and prompts are not served", "error", err)
		return fmt.Errorf("upstream: %s: %w", u.opts.Name, err)
	}
	if len(skipped) > 0 {
		u.logger.Warn("upstream: resources left out: another server serves their URIs", "skipped", skipped)
	}
	u.logger.Info("upstream: lists updated", "tools", len(set.Tools), "resources", len(set.Resources),
		"resource_templates", len(set.Templates), "prompts", len(set.Prompts))
	return nil
}

// setSource hands set to the catalog. The SDK panics on a tool it cannot
// serve; list filters those out, and a panic left is an error here, not a
// crash.
func (u *upstream) setSource(set catalog.Set) (skipped []string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("upstream: %s: the catalog refused the lists: %v", u.opts.Name, p)
		}
	}()
	return u.cat.SetSource("upstream "+u.opts.Name, set)
}

// list reads every list the upstream offers, following pagination.
func (u *upstream) list(ctx context.Context, sess *sdk.ClientSession) (catalog.Set, error) {
	var set catalog.Set
	caps := &sdk.ServerCapabilities{}
	if r := sess.InitializeResult(); r != nil && r.Capabilities != nil {
		caps = r.Capabilities
	}
	if caps.Tools != nil {
		err := listAll(ctx, func(ctx context.Context, c string) ([]*sdk.Tool, string, error) {
			r, err := sess.ListTools(ctx, &sdk.ListToolsParams{Cursor: c})
			if err != nil {
				return nil, "", err
			}
			return r.Tools, r.NextCursor, nil
		}, func(t *sdk.Tool) {
			if st, ok := u.tool(t); ok {
				set.Tools = append(set.Tools, st)
			}
		})
		if err != nil {
			return set, fmt.Errorf("tools/list: %w", err)
		}
	}
	if caps.Resources != nil {
		err := listAll(ctx, func(ctx context.Context, c string) ([]*sdk.Resource, string, error) {
			r, err := sess.ListResources(ctx, &sdk.ListResourcesParams{Cursor: c})
			if err != nil {
				return nil, "", err
			}
			return r.Resources, r.NextCursor, nil
		}, func(r *sdk.Resource) {
			if r.URI != "" {
				set.Resources = append(set.Resources, catalog.SetResource{Resource: r, Handler: u.readResource})
			}
		})
		if err != nil {
			return set, fmt.Errorf("resources/list: %w", err)
		}
		err = listAll(ctx, func(ctx context.Context, c string) ([]*sdk.ResourceTemplate, string, error) {
			r, err := sess.ListResourceTemplates(ctx, &sdk.ListResourceTemplatesParams{Cursor: c})
			if err != nil {
				return nil, "", err
			}
			return r.ResourceTemplates, r.NextCursor, nil
		}, func(t *sdk.ResourceTemplate) {
			if t.URITemplate != "" && validTemplate(t.URITemplate) {
				set.Templates = append(set.Templates, catalog.SetTemplate{Template: t, Handler: u.readResource})
			}
		})
		if err != nil {
			return set, fmt.Errorf("resources/templates/list: %w", err)
		}
	}
	if caps.Completions != nil {
		set.Complete = u.complete
	}
	if caps.Resources != nil && caps.Resources.Subscribe {
		set.Subscribe, set.Unsubscribe = u.subscribe, u.unsubscribe
	}
	if caps.Prompts != nil {
		err := listAll(ctx, func(ctx context.Context, c string) ([]*sdk.Prompt, string, error) {
			r, err := sess.ListPrompts(ctx, &sdk.ListPromptsParams{Cursor: c})
			if err != nil {
				return nil, "", err
			}
			return r.Prompts, r.NextCursor, nil
		}, func(p *sdk.Prompt) {
			name := u.prefixed(p.Name)
			if p.Name == "" || !mcpname.Valid(name) {
				u.logger.Warn("upstream: a prompt is skipped: its namespaced name is not valid", "prompt", truncate(p.Name))
				return
			}
			pp := *p
			pp.Name = name
			set.Prompts = append(set.Prompts, catalog.SetPrompt{Prompt: &pp, Handler: u.getPrompt(p.Name)})
		})
		if err != nil {
			return set, fmt.Errorf("prompts/list: %w", err)
		}
	}
	return set, nil
}

// listAll reads every page of a list, calling add on each item: it
// follows nextCursor until the upstream gives none, and stops with an
// error when a cursor comes back a second time (a loop) or the list
// exceeds maxListed items or maxPages pages, so that a misbehaving
// upstream can neither truncate the list silently nor page forever.
func listAll[T any](ctx context.Context, page func(ctx context.Context, cursor string) ([]T, string, error), add func(T)) error {
	seen := map[string]bool{}
	cursor, n := "", 0
	for pages := 1; ; pages++ {
		items, next, err := page(ctx, cursor)
		if err != nil {
			return err
		}
		for _, it := range items {
			if n++; n > maxListed {
				return fmt.Errorf("more than %d items", maxListed)
			}
			add(it)
		}
		switch {
		case next == "":
			return nil
		case seen[next]:
			return fmt.Errorf("page %d repeats an earlier cursor", pages)
		case pages >= maxPages:
			return fmt.Errorf("more than %d pages", maxPages)
		}
		seen[next] = true
		cursor = next
	}
}

func (u *upstream) prefixed(name string) string {
	if u.prefix == "" {
		return name
	}
	return u.prefix + "_" + name
}

// tool returns the served form of an upstream tool: namespaced, with its
// schemas as JSON. ok is false for a tool that is filtered out or that the
// SDK could not serve (an invalid name, an input schema that is not an
// object).
func (u *upstream) tool(t *sdk.Tool) (catalog.SetTool, bool) {
	if t == nil || t.Name == "" || !u.opts.allowed(t.Name) {
		return catalog.SetTool{}, false
	}
	name := u.prefixed(t.Name)
	if !mcpname.Valid(name) {
		u.logger.Warn("upstream: a tool is skipped: its namespaced name is not valid", "tool", truncate(name))
		return catalog.SetTool{}, false
	}
	in, ok := objectSchema(t.InputSchema)
	if !ok {
		u.logger.Warn("upstream: a tool is skipped: its input schema is not a JSON object schema", "tool", name)
		return catalog.SetTool{}, false
	}
	tt := *t
	tt.Name = name
	tt.InputSchema = in
	tt.OutputSchema = nil
	if t.OutputSchema != nil {
		if out, ok := objectSchema(t.OutputSchema); ok {
			tt.OutputSchema = out
		}
	}
	return catalog.SetTool{Tool: &tt, Handler: u.callTool(t.Name), Direct: u.directTool(t.Name)}, true
}

// objectSchema encodes s as JSON if it is a schema of type object.
func objectSchema(s any) (json.RawMessage, bool) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, false
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil || m["type"] != "object" {
		return nil, false
	}
	return b, true
}

// validTemplate reports whether the SDK accepts t as a URI template; it
// panics on one it does not.
func validTemplate(t string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	s := sdk.NewServer(&sdk.Implementation{Name: "check"}, nil)
	s.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: t}, nil)
	return true
}

func truncate(s string) string { return truncateN(s, 128) }

// maxErrorMessage bounds an upstream's error message passed to the caller.
const maxErrorMessage = 512

func truncateN(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// start begins a request to the upstream, through the StartCall hook.
func (u *upstream) start(ctx context.Context, method, target string) (context.Context, func(kind string)) {
	if u.deps.Hooks.StartCall == nil {
		return ctx, func(string) {}
	}
	return u.deps.Hooks.StartCall(ctx, u.opts.Name, method, target)
}

// meta is the _meta of a request sent upstream: the trace context, if
// the Inject hook adds it; nil otherwise.
func (u *upstream) meta(ctx context.Context) sdk.Meta {
	if u.deps.Hooks.Inject == nil {
		return nil
	}
	m := sdk.Meta{}
	u.deps.Hooks.Inject(ctx, m)
	if len(m) == 0 {
		return nil
	}
	return m
}

// errNotConnected is sessionFor's error while the shared session is down.
var errNotConnected = errors.New("upstream: not connected")

// sessionFor returns the session a request of the caller described by
// extra goes to: the shared one, or for a per_principal upstream the
// caller's own process. release must be called when the request is done.
func (u *upstream) sessionFor(ctx context.Context, extra *sdk.RequestExtra) (*sdk.ClientSession, func(), error) {
	if u.pool != nil {
		var env []string
		if u.opts.PassPrincipal == PassPrincipalEnv {
			if p, ok := u.principal(extra); ok {
				env = p.environ()
			}
		}
		var subject string
		if u.opts.OAuth.exchange() && u.deps.SubjectToken != nil && extra != nil {
			subject, _ = u.deps.SubjectToken(extra.TokenInfo)
		}
		return u.pool.acquire(ctx, u.principalKey(extra), env, subject)
	}
	sess := u.session()
	if sess == nil {
		return nil, nil, errNotConnected
	}
	return sess, func() {}, nil
}

// callTool returns the handler of the upstream tool called name.
func (u *upstream) callTool(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		res, err := u.call(ctx, req, name, false)
		if err != nil {
			return nil, err
		}
		return res.(*sdk.CallToolResult), nil // only a direct call gets another type
	}
}

// directTool returns the direct handler of the upstream tool called
// name (see catalog.DirectHandler): a 2026-07-28 caller's call served
// without Portcullis's SDK server, by the direct hop where the call takes
// it and by the SDK client otherwise.
func (u *upstream) directTool(name string) catalog.DirectHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (sdk.Result, error) {
		return u.call(ctx, req, name, true)
	}
}

// call sends a call of the upstream tool called name for the caller's
// request req. A direct call (see directTool) has no caller session: its
// caller takes input-required results itself, asked for no
// notifications, and may get the upstream's complete result as it came
// (*catalog.RawToolResult); any other call's result is a
// *sdk.CallToolResult.
func (u *upstream) call(ctx context.Context, req *sdk.CallToolRequest, name string, direct bool) (sdk.Result, error) {
	ctx, done := u.start(ctx, "tools/call", name)
	sess, release, err := u.sessionFor(ctx, req.Extra)
	if err != nil {
		done(KindUnavailable)
		return u.errorResult(KindUnavailable, err), nil
	}
	defer release()
	params := &sdk.CallToolParams{Name: name, Arguments: json.RawMessage(req.Params.Arguments), Meta: u.meta(ctx)}
	if len(req.Params.Arguments) == 0 {
		params.Arguments = map[string]any{}
	}
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		ours := "portcullis-" + strconv.FormatUint(u.nextToken.Add(1), 10)
		u.progress.Store(ours, progressTarget{ctx: ctx, session: req.Session, token: tok})
		// The SDK may hand over a progress notification after the
		// result that followed it; it still reaches the caller.
		defer time.AfterFunc(progressGrace, func() { u.progress.Delete(ours) })
		params.SetProgressToken(ours)
	}
	if u.opts.PassPrincipal == PassPrincipalMeta {
		if p, ok := u.principal(req.Extra); ok {
			if params.Meta == nil {
				params.Meta = sdk.Meta{}
			}
			params.Meta[MetaKeyPrincipal] = p.meta()
		}
	}
	params.Meta = callerMeta(params.Meta, sess, req, req.Params.Meta)
	// An upstream that offers tasks may answer a caller that declared
	// them with its task handle, which the SDK client cannot decode:
	// the raw result is captured (tasks.go).
	var capture *taskCapture
	if tasks.AcceptsRemote(ctx) && offersTasks(sess) {
		capture = &taskCapture{}
		tasksCapability(params.Meta)
	}
	state, err := u.unwrapState(req.Params.RequestState)
	if err != nil {
		done(KindProtocol)
		return nil, err
	}
	target := &callTarget{ctx: ctx, session: req.Session, upstream: sess, direct: direct}
	var sendRound send
	if h := u.hopFor(sess, name); h != nil {
		// The direct hop (hop.go) passes the call's messages on as it
		// reads them, before its result: nothing to track or await.
		sendRound = func(responses sdk.InputResponseMap, state string) (sdk.Result, error) {
			p := *params
			p.InputResponses, p.RequestState = responses, state
			return h.callTool(ctx, u, target, capture, &p)
		}
	} else {
		untrack := u.inflight.add(sess, target)
		defer untrack()
		// The upstream's progress and log messages sent before its
		// result reach the caller before the result does.
		defer u.awaitNotes(ctx, sess)
		tctx := context.WithValue(ctx, targetKey{}, target)
		if capture != nil {
			tctx = withCapture(tctx, capture)
		}
		sendRound = func(responses sdk.InputResponseMap, state string) (sdk.Result, error) {
			p := *params
			p.InputResponses, p.RequestState = responses, state
			res, err := sess.CallTool(tctx, &p)
			if err != nil {
				return nil, err
			}
			return res, nil
		}
	}
	res, err := u.rounds(target, sendRound, req.Params.InputResponses, state)
	if err == nil && capture != nil {
		if raw := capture.result(); raw != nil && tasks.SetRemote(ctx, u.opts.Name, raw) {
			// The caller gets the upstream's task handle instead
			// (mcp/remotetasks.go); this placeholder is not sent.
			done("")
			return &sdk.CallToolResult{}, nil
		}
	}
	kind := u.classify(ctx, sess, err)
	if err == nil && toolError(res) {
		kind = KindToolError
	}
	done(kind)
	if rpcErr, ok := passedError(err); ok {
		// The completion of a URL-mode elicitation the caller is
		// asked to open comes later, outside the call (relay.go).
		for _, p := range urlElicitations(rpcErr) {
			u.rememberElicitation(target, p)
		}
		return nil, rpcErr
	}
	if err != nil {
		return u.errorResult(kind, err), nil
	}
	return res, nil
}

// toolError reports whether res is a tool's error result.
func toolError(res sdk.Result) bool {
	switch r := res.(type) {
	case *sdk.CallToolResult:
		return r.IsError
	case *catalog.RawToolResult:
		return r.IsError
	}
	return false
}

// classify names the kind of a failed request and, when the connection
// of the shared session sess broke, has it re-established. (A caller's
// own per_principal process is replaced when it exits.)
func (u *upstream) classify(ctx context.Context, sess *sdk.ClientSession, err error) string {
	var rpcErr *jsonrpc.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &rpcErr):
		return KindProtocol
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return KindTimeout
	case ctx.Err() != nil:
		return KindCanceled
	default:
		if sess == u.session() && !streamEnded(err) {
			signal(u.broken)
		}
		return KindTransport
	}
}

// streamEnded reports whether err is the SDK client's answer to a call
// whose response stream an HTTP upstream closed without a response and
// without an event id to resume from: that call is lost, but the session
// and the other calls in flight on it are fine, and reconnecting would
// end those too. (The SDK has no sentinel error for it.)
func streamEnded(err error) bool {
	return strings.Contains(err.Error(), "request terminated without response")
}

// errorResult is what the caller reads when a call did not reach the
// upstream's tool or did not come back. It names the upstream, never its
// address or internals; the upstream's own JSON-RPC error message is
// passed on, as the upstream meant the caller to read it.
func (u *upstream) errorResult(kind string, err error) *sdk.CallToolResult {
	var msg string
	switch kind {
	case KindUnavailable:
		switch {
		case errors.Is(err, errNoPrincipal):
			msg = fmt.Sprintf("upstream: the MCP server %q runs one process per caller and serves only callers with a token.", u.opts.Name)
		case errors.Is(err, errNoToken):
			msg = fmt.Sprintf("upstream: the MCP server %q is called with a token exchanged for the caller's, and this call came without a token.", u.opts.Name)
		case errors.As(err, new(*exchangeError)):
			u.logger.Warn("upstream: token exchange failed", "error", err)
			msg = fmt.Sprintf("upstream: the authorization server did not issue a token for the MCP server %q to this caller%s, so the call was not sent.", u.opts.Name, exchangeCode(err))
		case errors.Is(err, errPoolFull):
			msg = fmt.Sprintf("upstream: the MCP server %q runs one process per caller, and as many as allowed are busy. Retry in a moment.", u.opts.Name)
		case err != nil && !errors.Is(err, errNotConnected):
			u.logger.Warn("upstream: a caller's process did not start", "error", err)
			msg = fmt.Sprintf("upstream: the MCP server %q could not be started for this call. Retry in a few seconds.", u.opts.Name)
		default:
			msg = fmt.Sprintf("upstream: the MCP server %q is not connected right now; Portcullis is reconnecting to it. Retry in a few seconds.", u.opts.Name)
		}
	case KindTimeout:
		msg = fmt.Sprintf("upstream: the MCP server %q did not answer in time.", u.opts.Name)
	case KindCanceled:
		msg = fmt.Sprintf("upstream: the call to the MCP server %q was cancelled.", u.opts.Name)
	case KindProtocol:
		var rpcErr *jsonrpc.Error
		errors.As(err, &rpcErr)
		msg = fmt.Sprintf("upstream: the MCP server %q refused the call: %s", u.opts.Name, truncateN(rpcErr.Message, maxErrorMessage))
	case KindTransport:
		if streamEnded(err) {
			// The session is kept (see classify): nothing reconnects.
			msg = fmt.Sprintf("upstream: the MCP server %q closed the call's response stream before the result and gave no event id to resume it from (it keeps no event store), so the result cannot be fetched; the tool may have run. The next call goes to the same session.", u.opts.Name)
			break
		}
		fallthrough
	default:
		u.logger.Warn("upstream: a call failed", "error", err)
		msg = fmt.Sprintf("upstream: the connection to the MCP server %q broke during the call (it may have crashed or sent an invalid message); Portcullis is reconnecting. Retry in a few seconds.", u.opts.Name)
	}
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}

// exchangeCode is ` (<OAuth error code>)` of a failed token exchange, or
// nothing without one.
func exchangeCode(err error) string {
	var xe *tokenexchange.Error
	if errors.As(err, &xe) && xe.Code != "" {
		return " (" + xe.Code + ")"
	}
	return ""
}

// requestError is the JSON-RPC error for a failed resources/read or
// prompts/get, which have no error result.
func (u *upstream) requestError(kind string, err error) error {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return rpcErr
	}
	res := u.errorResult(kind, err)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: res.Content[0].(*sdk.TextContent).Text}
}

func (u *upstream) readResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	r, err := u.forward(ctx, "resources/read", req.Params.URI, req.Extra, req.Session, req.Params.RequestState, req.Params.InputResponses,
		func(ctx context.Context, sess *sdk.ClientSession, h *hop, t *callTarget, responses sdk.InputResponseMap, state string) (sdk.Result, error) {
			p := &sdk.ReadResourceParams{URI: req.Params.URI, Meta: callerMeta(u.meta(ctx), sess, req, req.Params.Meta), InputResponses: responses, RequestState: state}
			if h != nil {
				return h.readResource(ctx, u, t, p)
			}
			res, err := sess.ReadResource(ctx, p)
			if err != nil {
				return nil, err
			}
			return res, nil
		})
	if err != nil {
		return nil, err
	}
	return r.(*sdk.ReadResourceResult), nil
}

func (u *upstream) getPrompt(name string) sdk.PromptHandler {
	return func(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		r, err := u.forward(ctx, "prompts/get", name, req.Extra, req.Session, req.Params.RequestState, req.Params.InputResponses,
			func(ctx context.Context, sess *sdk.ClientSession, h *hop, t *callTarget, responses sdk.InputResponseMap, state string) (sdk.Result, error) {
				p := &sdk.GetPromptParams{Name: name, Arguments: req.Params.Arguments, Meta: callerMeta(u.meta(ctx), sess, req, req.Params.Meta), InputResponses: responses, RequestState: state}
				if h != nil {
					return h.getPrompt(ctx, u, t, p)
				}
				res, err := sess.GetPrompt(ctx, p)
				if err != nil {
					return nil, err
				}
				return res, nil
			})
		if err != nil {
			return nil, err
		}
		return r.(*sdk.GetPromptResult), nil
	}
}

// forward sends a caller's prompts/get or resources/read (method, of
// target) upstream, round by round (see rounds), from the caller's
// requestState and input responses: send makes one round on the session
// the caller's request goes to, by its hop h when it has one. ctx, which
// send gets, names the caller of t for the requests the upstream makes
// within the round.
func (u *upstream) forward(ctx context.Context, method, target string, extra *sdk.RequestExtra, caller *sdk.ServerSession, requestState string, responses sdk.InputResponseMap,
	send func(ctx context.Context, sess *sdk.ClientSession, h *hop, t *callTarget, responses sdk.InputResponseMap, state string) (sdk.Result, error)) (sdk.Result, error) {
	ctx, done := u.start(ctx, method, target)
	sess, release, err := u.sessionFor(ctx, extra)
	if err != nil {
		done(KindUnavailable)
		return nil, u.requestError(KindUnavailable, err)
	}
	defer release()
	state, err := u.unwrapState(requestState)
	if err != nil {
		done(KindProtocol)
		return nil, err
	}
	t := &callTarget{ctx: ctx, session: caller, upstream: sess}
	tctx := context.WithValue(ctx, targetKey{}, t)
	h := u.hopOf(sess)
	r, err := u.rounds(t, func(responses sdk.InputResponseMap, state string) (sdk.Result, error) {
		return send(tctx, sess, h, t, responses, state)
	}, responses, state)
	kind := u.classify(ctx, sess, err)
	done(kind)
	if err != nil {
		return nil, u.requestError(kind, err)
	}
	return r, nil
}

// complete forwards a completion request for one of the upstream's
// prompts (named as served) or resource templates.
func (u *upstream) complete(ctx context.Context, req *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
	ref := *req.Params.Ref
	if ref.Type == "ref/prompt" && u.prefix != "" {
		ref.Name = strings.TrimPrefix(ref.Name, u.prefix+"_")
	}
	ctx, done := u.start(ctx, "completion/complete", ref.Name+ref.URI)
	sess, release, err := u.sessionFor(ctx, req.Extra)
	if err != nil {
		done(KindUnavailable)
		return nil, u.requestError(KindUnavailable, err)
	}
	defer release()
	res, err := sess.Complete(ctx, &sdk.CompleteParams{Ref: &ref, Argument: req.Params.Argument, Context: req.Params.Context, Meta: u.meta(ctx)})
	kind := u.classify(ctx, sess, err)
	done(kind)
	if err != nil {
		return nil, u.requestError(kind, err)
	}
	return res, nil
}

// subscribe passes a caller's subscription to uri on to the upstream,
// unless another caller's already did.
func (u *upstream) subscribe(ctx context.Context, uri string) error {
	u.subsMu.Lock()
	defer u.subsMu.Unlock()
	u.subs[uri]++
	if u.subs[uri] > 1 {
		return nil
	}
	sess := u.session()
	if sess == nil {
		return nil // subscribed when the upstream is back (resubscribe)
	}
	if err := sess.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
		if u.subs[uri]--; u.subs[uri] == 0 {
			delete(u.subs, uri)
		}
		return u.requestError(u.classify(ctx, sess, err), err)
	}
	return nil
}

// unsubscribe ends a caller's subscription to uri, and the upstream's when
// it was the last.
func (u *upstream) unsubscribe(ctx context.Context, uri string) error {
	u.subsMu.Lock()
	defer u.subsMu.Unlock()
	if u.subs[uri] == 0 {
		return nil
	}
	if u.subs[uri]--; u.subs[uri] > 0 {
		return nil
	}
	delete(u.subs, uri)
	if sess := u.session(); sess != nil {
		if err := sess.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: uri}); err != nil {
			u.logger.Debug("upstream: unsubscribing failed", "error", err)
		}
	}
	return nil
}

// resubscribe renews the callers' subscriptions on a new session.
func (u *upstream) resubscribe(ctx context.Context, sess *sdk.ClientSession) {
	u.subsMu.Lock()
	defer u.subsMu.Unlock()
	for uri := range u.subs {
		if err := sess.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
			u.logger.Warn("upstream: renewing a resource subscription failed", "error", err)
		}
	}
}

// forwardProgress passes an upstream's progress notification to the caller
// whose call it is about, under the caller's own token.
func (u *upstream) forwardProgress(ctx context.Context, req *sdk.ProgressNotificationClientRequest) {
	tok, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := u.progress.Load(tok)
	if !ok {
		return
	}
	t := v.(progressTarget)
	p := *req.Params
	p.ProgressToken = t.token
	// After the call, its context is done; the notification goes out
	// with the notification's own then.
	nctx := t.ctx
	if nctx.Err() != nil {
		nctx = ctx
	}
	if err := t.session.NotifyProgress(nctx, &p); err != nil {
		u.logger.Debug("upstream: passing on progress failed", "error", err)
	}
}
