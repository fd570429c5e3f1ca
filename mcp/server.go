package mcp

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/tasks"
)

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
