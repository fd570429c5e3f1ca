package mcp

import (
	"context"
	"log/slog"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
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
