package mcp

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/curation"
	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// Transport is how a [Server] is reached.
type Transport int

const (
	// HTTP is Streamable HTTP, served by [Server.Handler]: every protocol
	// era on one endpoint. Only calls over HTTP can become tasks, since
	// only the HTTP endpoint answers tasks/get.
	HTTP Transport = iota
	// Stdio is one client on stdin and stdout, served by
	// [Server.ServeStdio].
	Stdio
)

// Deps are what [New] builds a server from besides the catalog and the
// configuration: the seams to the rest of the program. Every field may be
// left zero; the zero value of each is documented.
type Deps struct {
	// Transport is how the server is reached; the zero value is [HTTP].
	Transport Transport
	// Version is the server version reported to clients.
	Version string
	// Instructions are sent to clients in the initialize result.
	Instructions string
	// Title is the server's human-readable name in its serverInfo; empty
	// means "Portcullis".
	Title string
	// Name names a virtual server (servers[].name) for telemetry: the
	// tasks it starts carry it (see [tasks.WithServer]). Empty for the
	// root server.
	Name string
	// Logger receives server-side errors (panics, sealing failures).
	// Nil means discard.
	Logger *slog.Logger
	// Sealer seals MRTR requestState. Nil disables multi-round-trip state:
	// a handler that returns requestState then fails the call, and any
	// requestState a client sends is rejected. The rounds of a task keep
	// their state in the server and need no sealing.
	Sealer *Sealer
	// Policy decides which tools a caller may see and call. Nil allows
	// every tool to everyone. A tool the policy refuses a caller is hidden
	// from it: a call answers as an unknown tool (see [Denial]), on every
	// path (the HTTP handler before the SDK sees the request, and the
	// SDK middleware for stdio and as a second line).
	Policy ToolPolicy
	// Rules are the policy's expression rules (see [Rules]): decided
	// with Policy, on the caller before a call and for tools/list, and on
	// the arguments of each call (after a virtual server's fixed
	// arguments and defaults are set). Nil means none.
	Rules Rules
	// OnDenied receives every tools/call answered as an unknown tool. Nil
	// means none.
	OnDenied DenialHook
	// Middleware is added to the server's receiving middleware, outermost
	// first, before Portcullis's own (so it sees what clients see, but a
	// call of a tool by a name that stands for it as the call of the
	// listed tool, see [CalledAs]). It
	// also runs around the calls the HTTP handler serves without the SDK
	// server (see [catalog.DirectHandler]), whose requests carry no
	// session.
	Middleware []sdk.Middleware
	// LimitHook receives an event whenever a limit refuses a request (body
	// size, session cap, tool timeout). Nil means none.
	LimitHook limits.Hook
	// Tasks enables the tasks extension (io.modelcontextprotocol/tasks):
	// the server advertises it, the HTTP handler answers tasks/get,
	// tasks/update and tasks/cancel, and calls over HTTP of the tools the
	// catalog marks (see [catalog.Catalog.TaskSupport]) run as tasks; over
	// stdio a tool that requires tasks is refused. Nil leaves it off.
	Tasks *tasks.Manager
	// RemoteTasks routes tasks/get, tasks/update and tasks/cancel of the
	// tasks that upstreams created for calls they were forwarded (see
	// [tasks.RemoteSlot]). Nil, or no Sealer or Tasks, leaves remote tasks
	// off: a call is never offered the chance to become one.
	RemoteTasks tasks.RemoteRouter
	// StepUp answers a call of a tool the caller sees but may not call
	// with the spec's step-up response: 403, WWW-Authenticate error
	// "insufficient_scope" naming scopes (see the auth package). Nil
	// means no step-up: every tool the policy refuses is hidden, as
	// always over stdio.
	StepUp func(w http.ResponseWriter, r *http.Request, scopes []string)
	// PrincipalKey names the caller that [Options.MaxSessionsPerPrincipal]
	// counts under; an empty key (no principal, as with auth off) is held
	// to MaxSessions only. Nil means no per-principal share.
	PrincipalKey limits.KeyFunc
	// SharedSessions is where the replicas share legacy sessions (see
	// [sharedsession.Backend]): with its Store, any replica serves any
	// request of a session, adopting a session another replica made, and
	// a session's standalone stream, its Last-Event-ID replay and a
	// client's answer to a server→client request work on any replica,
	// through its Log and Bus (in this process when nil, as replicas
	// sharing one process do). The zero value keeps each session on the
	// replica that made it. Only for [HTTP]; the handler serves shared
	// sessions between [Handler.Start] and [Handler.Close].
	SharedSessions sharedsession.Backend
	// OnSessionAdopted is called whenever this replica adopts a session
	// another replica made (or that it held and closed). Nil means none.
	OnSessionAdopted func(context.Context)
	// OnEventsReplayed is called with the number of events a
	// Last-Event-ID replay wrote. Nil means none.
	OnEventsReplayed func(ctx context.Context, n int)
	// OnAnswerForwarded is called whenever a client's answer to a
	// server→client request, posted here, is handed to the replica whose
	// call waits for it (itself included). Nil means none.
	OnAnswerForwarded func(context.Context)
	// Exposure is what the server serves of the catalog, and how (see
	// [curation.Exposure]): a virtual server's tools, resources and
	// prompts, renamed and curated. The server serves them through a
	// [catalog.ServerView] of it, and its callers see and call them by
	// the names it exposes, everywhere: lists, calls, the tool gate and
	// Policy (which name exposed names), Mcp-Name, direct calls
	// (curate.go). Nil serves the whole catalog as it is, as the root
	// server does.
	Exposure *curation.Exposure
}

// Server is an MCP server built from a catalog: the SDK server with
// Portcullis's middleware, and, for [HTTP], the /mcp handler around it.
type Server struct {
	sdk     *sdk.Server
	handler *Handler            // nil for Stdio
	view    *catalog.ServerView // nil without Deps.Exposure
}

// New builds the server that offers everything in cat, configured by opts
// (zero fields take their defaults, see [Options.Defaults]) and wired to
// deps.
//
// Besides the catalog's tools, resources and prompts, the server gets
// receiving middleware that recovers panicking handlers into error results,
// answers a call of a tool the caller may not see as an unknown tool (naming
// the nearest tool it may see), bounds each tool call by its timeout, runs
// task tools as tasks, and seals and opens MRTR requestState.
func New(cat *catalog.Catalog, opts Options, deps Deps) *Server {
	opts.Defaults()
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.LimitHook == nil {
		deps.LimitHook = func(context.Context, limits.Event) {}
	}
	sopts := &sdk.ServerOptions{
		Instructions: deps.Instructions,
		Logger:       sdkLogger(deps.Logger),
	}
	if deps.Tasks != nil {
		sopts.Capabilities = &sdk.ServerCapabilities{
			//lint:ignore SA1019 the 2026-07-28 revision deprecates MCP logging, sampling and roots; clients of earlier revisions still use them
			Logging:    &sdk.LoggingCapabilities{},
			Extensions: map[string]any{tasks.ExtensionID: map[string]any{}},
		}
	}
	cat.Apply(sopts)
	impl := &sdk.Implementation{
		Name:    "portcullis",
		Title:   cmp.Or(deps.Title, "Portcullis"),
		Version: deps.Version,
	}
	s := sdk.NewServer(impl, sopts)
	// The SDK's own tool handling, for direct calls of the catalog's own
	// tools: captured before any middleware of ours is added.
	own := &ownTools{server: s}
	s.AddReceivingMiddleware(own.capture)
	// What the tool gate, tasks, timeouts and direct calls ask about a
	// tool, by the name callers call it.
	var (
		view       *catalog.ServerView
		tools      Tools = cat
		support          = cat.TaskSupport
		direct           = cat.Direct
		noSession        = cat.NoSession
		timeouts         = toolTimeoutMap(opts.ToolTimeouts)
		timeoutFor       = func(tool string) (time.Duration, bool) { d, ok := timeouts[tool]; return d, ok }
	)
	if deps.Exposure != nil {
		view = cat.RegisterView(s, *deps.Exposure)
		tools, support, direct = view, view.TaskSupport, view.Direct
		noSession = func(name string) bool {
			t, ok := view.Tool(name)
			return ok && cat.NoSession(t.Original)
		}
		timeoutFor = func(tool string) (time.Duration, bool) {
			if d, ok := timeouts[tool]; ok {
				return d, ok
			}
			// A tool's timeout follows it under another name.
			d, ok := timeouts[view.Original(tool)]
			return d, ok
		}
	} else {
		cat.Register(s)
	}

	// One gate, for the SDK middleware here and the HTTP handler.
	gate := newToolGate(deps.Policy, deps.Rules, tools, deps.OnDenied, deps.Transport == HTTP && deps.StepUp != nil)
	// Applied right to left: recover is innermost so that it turns a panic
	// into a result the sealing and suggestion layers see like any other.
	// Outermost: an App's call by its upstream's name is a call of the
	// listed tool for every layer (apps.go).
	mws := append([]sdk.Middleware{resolveToolsMiddleware(gate)}, deps.Middleware...)
	var (
		caps    *sessionCap
		streams *openStreams
		shared  *sharedSessions
	)
	if deps.Transport == HTTP {
		caps = newSessionCap(opts.MaxSessions, opts.MaxSessionsPerPrincipal, s, deps.PrincipalKey, deps.LimitHook, deps.Logger)
		streams = newOpenStreams()
		if *opts.Sessions {
			shared = newSharedSessions(s, caps, streams, sharedConfig{
				backend: deps.SharedSessions, ttl: opts.SessionIdleTimeout, logger: deps.Logger,
				onAdopt: deps.OnSessionAdopted, onAnswer: deps.OnAnswerForwarded, onReplayed: deps.OnEventsReplayed,
			})
		}
	}
	if shared != nil {
		mws = append(mws, sessionRecordMiddleware(shared))
	}
	mws = append(mws,
		gateToolsMiddleware(gate, view),
		filterToolsMiddleware(gate),
		taskMiddleware(deps.Tasks, deps.Name, support, deps.Transport, newRemoteTasks(deps)),
		sealStateMiddleware(deps.Sealer, deps.Logger),
		toolTimeoutLookupMiddleware(opts.ToolTimeout, timeoutFor, deps.LimitHook, deps.Logger),
		recoverMiddleware(deps.Logger),
	)
	if view != nil {
		// Innermost: every layer above sees the names callers use.
		mws = append(mws, curateMiddleware(view))
	}
	s.AddReceivingMiddleware(mws...)
	srv := &Server{sdk: s, view: view}
	if deps.Transport == HTTP {
		lookup := func(name string) catalog.DirectHandler {
			if h := direct(name); h != nil {
				return h
			}
			if noSession(name) {
				return own.call
			}
			return nil
		}
		srv.handler = newHandler(s, opts, gate, newDirectCalls(lookup, support, gate, mws, impl), caps, streams, shared, deps)
	}
	return srv
}

// View returns the view the server serves of its catalog (see
// [Deps.Exposure]), which maps the names callers use to the catalog's;
// nil for a server without an exposure.
func (s *Server) View() *catalog.ServerView { return s.view }

// SDK returns the SDK server, for what works on it directly (the catalog
// sends list-changed notifications through it, see [catalog.Catalog.Run]).
func (s *Server) SDK() *sdk.Server { return s.sdk }

// Handler returns the /mcp handler of an [HTTP] server; nil for [Stdio].
func (s *Server) Handler() *Handler { return s.handler }

// ServeStdio serves a [Stdio] server over newline-delimited JSON-RPC on in
// and out until in ends or ctx does. out carries nothing but JSON-RPC
// frames: send logs elsewhere (stderr).
//
// Bad input never ends serving: a line that is not JSON is answered with a
// -32700 parse error, one that is JSON but not a JSON-RPC 2.0 message (or a
// batch the negotiated protocol version does not allow) with -32600, an
// over-long line (over [sdk.DefaultMaxLineLength]) is answered with -32600
// and skipped, and blank lines are ignored. When in ends, every request
// already read is answered before ServeStdio returns nil.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	return serveStdio(ctx, s.sdk, in, out, 0)
}
