package upstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server→client traffic during a call. An upstream may ask the client for
// input while it serves a call (elicitation/create, sampling/createMessage)
// and send it log messages. Portcullis passes these to the caller whose
// call caused them:
//
//   - An upstream on the 2026-07-28 era returns input requests in the
//     call's result, which go to the caller in Portcullis's result or are
//     sent to the caller's session within the call (mrtr.go). A request
//     it sends anyway is refused with a JSON-RPC error and reaches no
//     caller, whichever sender the call took (refuseStateless).
//   - An upstream on an older era sends them as requests on its session.
//     They carry no reference to the call, so they go to the caller of the
//     one call in flight on that session; with none or several in flight,
//     they are refused with a JSON-RPC error.
//   - Log messages are notifications, which the SDK client hands to its
//     handler on a goroutine of its own: one sent just before a call's
//     result can be handled after the call has returned. So a log message
//     goes to the one call in flight on that session or, with none in
//     flight, to the one call that ended within lateGrace; otherwise it is
//     dropped. (A message handled late while another call is in flight on
//     a shared session goes to that call's caller: nothing in it says
//     which call it belongs to. Per-principal upstreams share no session.)
//
// A caller on the 2026-07-28 era cannot be sent requests during a call;
// those are refused with a JSON-RPC error that says so.

//lint:file-ignore SA1019 the 2026-07-28 revision deprecates MCP logging, sampling and roots; clients of earlier revisions still use them, and an upstream on an older era sends them

// relayTarget returns the caller a request (method) of the upstream goes
// to, or the JSON-RPC error the upstream is answered with.
func (u *upstream) relayTarget(ctx context.Context, cs *sdk.ClientSession, method string) (*callTarget, error) {
	t, err := u.inflight.target(ctx, cs)
	if err != nil {
		return nil, u.refuse(method, err.Error())
	}
	v := ""
	switch {
	case t.direct:
		v = statelessEra // the caller's request was of it (directTool)
	case t.session == nil:
		return nil, u.refuse(method, "the caller's session cannot receive requests")
	default:
		v = callerProtocol(t.session)
	}
	if v >= statelessEra {
		return nil, u.refuse(method, fmt.Sprintf("the caller speaks protocol %s, in which a server cannot send it requests during a call", v))
	}
	return t, nil
}

// refuseStateless is the answer to a request that an upstream whose
// session speaks protocol version (2026-07-28 or later) sends: in that
// era a server asks for input in its result (mrtr.go), never by a
// request within a call, so the request reaches no caller. Both senders
// answer with it, whichever the call took: the SDK client (receiving)
// and the direct hop (hop.refuse).
func (u *upstream) refuseStateless(method, version string) error {
	return u.refuse(method, fmt.Sprintf("the upstream speaks protocol %s, in which a server asks for input in its result, not by a request within a call", version))
}

// refuse is the JSON-RPC error an upstream's request (method) that
// Portcullis does not pass to a caller is answered with, and why.
func (u *upstream) refuse(method, why string) error {
	u.logger.Debug("upstream: a request to the client is refused", "method", method, "reason", why)
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("portcullis: %s not passed to the client: %s", method, why)}
}

// relayError is the upstream's answer when the caller failed a request:
// the caller's JSON-RPC error as it is, anything else as an internal error.
func relayError(method string, err error) error {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return rpcErr
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("portcullis: the client did not answer %s: %v", method, err)}
}

// elicit passes an upstream's elicitation request to its caller.
func (u *upstream) elicit(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	t, err := u.relayTarget(ctx, req.Session, "elicitation/create")
	if err != nil {
		return nil, err
	}
	return u.askElicit(t, req.Params)
}

// createMessage passes an upstream's sampling request to its caller.
func (u *upstream) createMessage(ctx context.Context, req *sdk.CreateMessageWithToolsRequest) (*sdk.CreateMessageWithToolsResult, error) {
	t, err := u.relayTarget(ctx, req.Session, "sampling/createMessage")
	if err != nil {
		return nil, err
	}
	return u.askSampling(t, req.Params)
}

// listRoots passes an upstream's roots request to its caller.
func (u *upstream) listRoots(ctx context.Context, req *sdk.ListRootsRequest) (*sdk.ListRootsResult, error) {
	t, err := u.relayTarget(ctx, req.Session, "roots/list")
	if err != nil {
		return nil, err
	}
	params := req.Params
	if params == nil {
		params = &sdk.ListRootsParams{}
	}
	return u.askRoots(t, params)
}

// log passes an upstream's log message to the caller of the call it was
// sent during, at the level the caller asked for (none, unless it did).
// Messages that belong to no one call are dropped (see logTarget).
func (u *upstream) log(ctx context.Context, req *sdk.LoggingMessageRequest) {
	t, err := u.inflight.logTarget(ctx, req.Session)
	if err != nil || t.session == nil {
		return
	}
	if err := t.session.Log(t.ctx, req.Params); err != nil {
		u.logger.Debug("upstream: passing on a log message failed", "error", err)
	}
}

// URL-mode elicitation completes out of band: the upstream later sends
// notifications/elicitation/complete naming the elicitation's id, outside
// any call. An id passed to a caller is kept (at most elicitationKept ids,
// for at most elicitationTTL each), so that its completion goes to that
// caller and no one else; a completion of an id not kept is dropped. A
// caller on 2026-07-28 has no stream outside its calls, so only callers of
// older eras are kept.

// elicitationTTL is how long the completion of a URL-mode elicitation is
// passed on after the elicitation reached its caller.
const elicitationTTL = 30 * time.Minute

// elicitationKept bounds the URL-mode elicitations awaiting completion.
const elicitationKept = 10_000

type elicitationTarget struct {
	session *sdk.ServerSession
	until   time.Time
}

// elicitationKey names a URL-mode elicitation: its id, as the upstream
// session that asked for it chose it (each caller of a per_principal
// upstream has a session, and its ids, of its own).
type elicitationKey struct {
	upstream *sdk.ClientSession
	id       string
}

// elicitations are the URL-mode elicitations of an upstream awaiting
// completion.
type elicitations struct {
	mu  sync.Mutex
	ids map[elicitationKey]elicitationTarget
}

// rememberElicitation keeps the id of a URL-mode elicitation passed to the
// caller of t.
func (u *upstream) rememberElicitation(t *callTarget, p *sdk.ElicitParams) {
	if p == nil || p.Mode != "url" || p.ElicitationID == "" || t.session == nil || t.upstream == nil || passesInput(t.session) {
		return
	}
	e := &u.elicitations
	e.mu.Lock()
	defer e.mu.Unlock()
	now := u.now()
	if e.ids == nil {
		e.ids = map[elicitationKey]elicitationTarget{}
	}
	for k, et := range e.ids {
		if now.After(et.until) {
			delete(e.ids, k)
		}
	}
	if len(e.ids) >= elicitationKept {
		return
	}
	e.ids[elicitationKey{t.upstream, p.ElicitationID}] = elicitationTarget{session: t.session, until: now.Add(elicitationTTL)}
}

// elicitationComplete passes an upstream's notice that a URL-mode
// elicitation completed to the caller the elicitation went to.
func (u *upstream) elicitationComplete(ctx context.Context, req *sdk.ElicitationCompleteNotificationRequest) {
	if req.Params == nil {
		return
	}
	k := elicitationKey{req.Session, req.Params.ElicitationID}
	e := &u.elicitations
	e.mu.Lock()
	et, ok := e.ids[k]
	delete(e.ids, k)
	e.mu.Unlock()
	if !ok || u.now().After(et.until) {
		u.logger.Debug("upstream: an elicitation completion names no elicitation passed on; dropped")
		return
	}
	if err := et.session.NotifyElicitationComplete(ctx, &sdk.ElicitationCompleteParams{ElicitationID: req.Params.ElicitationID}); err != nil {
		u.logger.Debug("upstream: passing on an elicitation completion failed", "error", err)
	}
}
