// Package upstream puts other MCP servers behind Portcullis: it connects
// to each configured upstream as an MCP client, over stdio (a child
// process it starts and supervises) or Streamable HTTP, and keeps what the
// upstream offers — tools, resources, resource templates, prompts — in a
// [tools.Catalog], so that the servers built from the catalog serve them
// with the same auth, policy, limits and telemetry as built-in tools.
//
// Build a [Manager] from the `upstreams:` config with [New], start it, and
// close it when the server stops:
//
//	m, err := upstream.New(cfg.Upstreams, catalog, upstream.Deps{Logger: logger})
//	if err != nil {
//		return err
//	}
//	m.Start(ctx)
//	defer m.Close()
//	health.AddCheck("required upstream MCP server not connected", m.Ready)
//
// An upstream tool "search" of an upstream whose prefix is "tickets" is
// served as "tickets_search"; prompts are prefixed the same way, resource
// URIs are served as the upstream names them. [Options.Allow] and
// [Options.Deny] choose the tools served. When an upstream's lists change
// (a list_changed notification, or a reconnect), the catalog follows and
// the SDK tells connected clients.
//
// A call reaches the upstream with the caller's arguments, a progress token
// of Portcullis's own (progress is passed back under the caller's token),
// the trace context [Hooks.Inject] writes and the log level the caller
// asked for; nothing else of the caller's request, and never the caller's
// token. What the upstream sends during the call — progress, log messages,
// elicitation, sampling and roots requests — goes to that call's caller, when it
// can be tied to the call and the caller's session can carry it; a request
// that cannot is refused with a JSON-RPC error (relay.go), as is every
// request a 2026-07-28 upstream sends within a call. An upstream's
// multi-round-trip result (2026-07-28) reaches a caller of that era with
// its requestState wrapped, so that the retry comes back to the same
// upstream; for an older caller Portcullis asks it within the call
// (mrtr.go). An upstream that offers the tasks extension may answer a
// caller that declared it with its task handle, which the MCP layer
// passes on; the caller's task requests come back through
// [Manager.RouteTask] (tasks.go). A tools/call to an http upstream on
// 2026-07-28 is sent as one direct HTTP exchange instead of through the
// SDK client, with the same params, headers, credentials and handling of
// the answer (hop.go). A call that fails
// because the upstream is down, crashed, hung or sent garbage ends with an
// error result that names the upstream ([KindTransport] and the other
// kinds go to [Hooks.StartCall]); the supervisor reconnects with backoff
// (restarting a stdio server), and other calls and upstreams go on. An
// http upstream on the 2025-11-25 era that closes a call's response
// stream mid-call (SEP-1699) has it resumed with Last-Event-ID when it gave
// event ids; the caller's own stream stays open meanwhile. Without event
// ids the call alone is lost, and its session kept.
//
// A stdio upstream is single-tenant: one process serves every caller, so
// whatever state it keeps is shared by all of them ([IsolationShared]).
//
// An http upstream with oauth.grant token_exchange ([GrantTokenExchange]),
// jwt_bearer ([GrantJWTBearer]) or id_jag ([GrantIDJAG]) is sent, on a
// session of each caller's own ([IsolationPerPrincipal]), a token issued
// for it on the caller's behalf: exchanged for the caller's (RFC 8693), got
// with the caller's token as the assertion of the JWT bearer grant (Entra
// ID's on-behalf-of flow, RFC 7523), or got at the upstream's
// authorization server with an identity assertion grant the identity
// provider issued for the caller's token (enterprise-managed
// authorization). The caller's token itself, which comes from
// [Deps.SubjectToken], is sent only to the token endpoint of the identity
// provider or authorization server.
//
// An http upstream with oauth.grant authorization_code
// ([GrantAuthorizationCode]) acts as each caller's own account there: the
// account the caller connected at the upstream's authorization server,
// whose token [Deps.Accounts] gives for every request of the caller's own
// session. A caller who has not connected one gets, on a session that
// declared URL-mode elicitation, the URL elicitation error naming the
// connect page, and the completion notice once connected
// ([Manager.ElicitationComplete]); any other caller gets a tool error
// naming the page. So does a caller whose call the upstream refused (HTTP
// 401) with a token that cannot be renewed (revoked at the upstream's
// authorization server). The shared session that lists the upstream's tools
// sends the configured headers (a service credential, if the upstream
// needs one to list).
//
// The package never imports Prometheus or OpenTelemetry: metrics and spans
// come in through [Hooks], which the root package wires to package observability.
//
// # The files, by job
//
// The files are layered: each uses only files listed after it.
//
// Serving the callers:
//
//   - tasks.go: [Manager.RouteTask], a caller's task request sent to the
//     upstream that holds the task.
//   - manager.go: [Manager], started and closed, ready or not.
//   - prompts.go, resources.go, completion.go, call.go: the handlers of
//     what an upstream offers: a caller's prompts/get, resources/read,
//     completion and tools/call, sent to a session (the shared one, or
//     the caller's own) by one of its senders; the _meta sent, rounds of
//     input, the StartCall hook.
//   - proxy.go: the proxy, one per configured server, which holds the
//     rest.
//
// Keeping the sessions:
//
//   - supervise.go: the shared session: connecting, serving until the
//     session ends, and reconnecting with backoff.
//   - sync.go: the upstream's lists, read page by page and put into the
//     catalog under its prefix, with the proxy's handlers.
//   - subscriptions.go: the callers' resource subscriptions, kept on the
//     shared session.
//   - pool.go: per_principal sessions, one per caller.
//   - supervisor.go: the supervisor and the shared session it keeps;
//     failures classified.
//   - connect.go: the connector: dialing (stdio processes, HTTP with the
//     upstream's credentials) and opening sessions, each linked with its
//     senders.
//
// Sending a request:
//
//   - client.go: the SDK client sessions are opened with; its handlers
//     are the relay's.
//   - links.go: each open session's senders.
//   - hop.go: the direct hop.
//   - sender.go: the two ways a request goes, chosen per request: the
//     SDK client session or the direct hop; and the notices a sender
//     hands on.
//
// What the upstream sends besides its answers:
//
//   - mrtr.go: input-required results, wrapped for the caller or
//     fulfilled through its session.
//   - progress.go: progress, passed on under the caller's own token.
//   - relay.go: the relay: requests for input and log messages to their
//     caller, list changes, resource updates, refusals.
//   - elicitation.go: URL-mode elicitations awaiting completion.
//   - inflight.go: the calls in flight, and their callers.
//
// Below them all:
//
//   - transport.go, notes.go, drain.go, capture.go: the connections: the
//     configured headers, the connection kept, notifications counted,
//     kept alive across calls, task handles captured and the tasks/
//     methods sent.
//   - account.go: connected accounts: the [Accounts] hook, a caller's
//     [ConnectRequired], the transport that sends the caller's account
//     token.
//   - errors.go: failures worded for the caller.
//   - caller.go: the caller's capabilities and log level, and the
//     protocol eras.
//   - deps.go, principal.go, options.go, oauth.go, grants.go, files.go,
//     proc_*.go: what the package is given: [Deps], the caller's
//     [Principal], the configuration (the oauth block in oauth.go;
//     grants.go: what the per-caller grants add to it) and its mounted
//     secrets.
package upstream
