package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

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

// relay passes on what an upstream sends besides its answers: requests
// for input, log messages and progress to the caller of the call they
// belong to, the news that a list changed to whoever keeps the lists
// (changed), that a resource was updated to the catalog (updated); and it
// answers with a JSON-RPC error the requests it does not pass on. The SDK
// client's handlers are its methods (client.go); the direct hop reaches
// it as its notices (sender.go); a call's rounds of input go through it
// (mrtr.go).
type relay struct {
	name   string // the upstream's, in the requestState it wraps
	logger *slog.Logger
	// changed is called when the upstream says one of its lists changed,
	// updated when it says one of its resources was.
	changed func()
	updated func(ctx context.Context, uri string)

	// inflight names the caller of each call in flight, for the
	// upstream's requests and log messages during it.
	inflight inflight
	// elicitations are the URL-mode elicitations passed to callers that
	// await completion (elicitation.go).
	elicitations elicitations
	// tokens maps the progress tokens sent upstream to the callers'
	// (progress.go).
	tokens    sync.Map // string → progressTarget
	nextToken atomic.Uint64
}

// listChanged tells whoever keeps the upstream's lists that one changed.
func (r *relay) listChanged() { r.changed() }

// resourceUpdated tells the catalog that the upstream's resource uri was
// updated.
func (r *relay) resourceUpdated(ctx context.Context, uri string) { r.updated(ctx, uri) }

// relayTarget returns the caller a request (method) of the upstream goes
// to, or the JSON-RPC error the upstream is answered with.
func (r *relay) relayTarget(ctx context.Context, cs *sdk.ClientSession, method string) (*callTarget, error) {
	t, err := r.inflight.target(ctx, cs)
	if err != nil {
		return nil, r.refuse(method, err.Error())
	}
	v := ""
	switch {
	case t.direct:
		v = statelessEra // the caller's request was of it (directTool)
	case t.session == nil:
		return nil, r.refuse(method, "the caller's session cannot receive requests")
	default:
		v = callerProtocol(t.session)
	}
	if v >= statelessEra {
		return nil, r.refuse(method, fmt.Sprintf("the caller speaks protocol %s, in which a server cannot send it requests during a call", v))
	}
	return t, nil
}

// refuseStateless is the answer to a request that an upstream whose
// session speaks protocol version (2026-07-28 or later) sends: in that
// era a server asks for input in its result (mrtr.go), never by a
// request within a call, so the request reaches no caller. Both senders
// answer with it, whichever the call took: the SDK client (receiving)
// and the direct hop (hop.refuse).
func (r *relay) refuseStateless(method, version string) error {
	return r.refuse(method, fmt.Sprintf("the upstream speaks protocol %s, in which a server asks for input in its result, not by a request within a call", version))
}

// refuse is the JSON-RPC error an upstream's request (method) that
// Portcullis does not pass to a caller is answered with, and why.
func (r *relay) refuse(method, why string) error {
	r.logger.Debug("upstream: a request to the client is refused", "method", method, "reason", why)
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
func (r *relay) elicit(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	t, err := r.relayTarget(ctx, req.Session, "elicitation/create")
	if err != nil {
		return nil, err
	}
	return r.askElicit(t, req.Params)
}

// createMessage passes an upstream's sampling request to its caller.
func (r *relay) createMessage(ctx context.Context, req *sdk.CreateMessageWithToolsRequest) (*sdk.CreateMessageWithToolsResult, error) {
	t, err := r.relayTarget(ctx, req.Session, "sampling/createMessage")
	if err != nil {
		return nil, err
	}
	return r.askSampling(t, req.Params)
}

// listRoots passes an upstream's roots request to its caller.
func (r *relay) listRoots(ctx context.Context, req *sdk.ListRootsRequest) (*sdk.ListRootsResult, error) {
	t, err := r.relayTarget(ctx, req.Session, "roots/list")
	if err != nil {
		return nil, err
	}
	params := req.Params
	if params == nil {
		params = &sdk.ListRootsParams{}
	}
	return r.askRoots(t, params)
}

// log passes an upstream's log message to the caller of the call it was
// sent during, at the level the caller asked for (none, unless it did).
// Messages that belong to no one call are dropped (see logTarget).
func (r *relay) log(ctx context.Context, req *sdk.LoggingMessageRequest) {
	if t, err := r.inflight.logTarget(ctx, req.Session); err == nil {
		r.logMessage(t, req.Params)
	}
}

// logMessage passes an upstream's log message to the caller of t, if it
// has a session to receive it.
func (r *relay) logMessage(t *callTarget, p *sdk.LoggingMessageParams) {
	if t.session == nil {
		return
	}
	if err := t.session.Log(t.ctx, p); err != nil {
		r.logger.Debug("upstream: passing on a log message failed", "error", err)
	}
}

// withTools is a sampling request of the older form in the form that
// carries tools, which the caller's session sends.
func withTools(p *sdk.CreateMessageParams) *sdk.CreateMessageWithToolsParams {
	msgs := make([]*sdk.SamplingMessageV2, 0, len(p.Messages))
	for _, m := range p.Messages {
		msgs = append(msgs, &sdk.SamplingMessageV2{Content: []sdk.Content{m.Content}, Role: m.Role})
	}
	return &sdk.CreateMessageWithToolsParams{
		Meta:             p.Meta,
		IncludeContext:   p.IncludeContext,
		MaxTokens:        p.MaxTokens,
		Messages:         msgs,
		Metadata:         p.Metadata,
		ModelPreferences: p.ModelPreferences,
		StopSequences:    p.StopSequences,
		SystemPrompt:     p.SystemPrompt,
		Temperature:      p.Temperature,
	}
}

// callerCaps returns the capabilities the caller of t declared at
// initialize; never nil.
func callerCaps(t *callTarget) *sdk.ClientCapabilities {
	if p := t.session.InitializeParams(); p != nil && p.Capabilities != nil {
		return p.Capabilities
	}
	return &sdk.ClientCapabilities{}
}

// askElicit passes an elicitation request to the caller of t.
func (r *relay) askElicit(t *callTarget, p *sdk.ElicitParams) (*sdk.ElicitResult, error) {
	r.elicitations.remember(t, p)
	res, err := t.session.Elicit(t.ctx, p)
	if err != nil {
		return nil, relayError("elicitation/create", err)
	}
	return res, nil
}

// askSampling passes a sampling request to the caller of t, if it offers
// sampling (with tools, when the request has tools).
func (r *relay) askSampling(t *callTarget, p *sdk.CreateMessageWithToolsParams) (*sdk.CreateMessageWithToolsResult, error) {
	const method = "sampling/createMessage"
	caps := callerCaps(t)
	switch {
	case caps.Sampling == nil:
		return nil, r.refuse(method, "the caller does not offer sampling")
	case p != nil && len(p.Tools) > 0 && caps.Sampling.Tools == nil:
		return nil, r.refuse(method, "the caller does not offer sampling with tools")
	}
	res, err := t.session.CreateMessageWithTools(t.ctx, p)
	if err != nil {
		return nil, relayError(method, err)
	}
	return res, nil
}

// askRoots passes a roots request to the caller of t, if it offers roots.
func (r *relay) askRoots(t *callTarget, p *sdk.ListRootsParams) (*sdk.ListRootsResult, error) {
	const method = "roots/list"
	if caps := callerCaps(t); caps.RootsV2 == nil && !caps.Roots.ListChanged {
		return nil, r.refuse(method, "the caller does not offer roots")
	}
	res, err := t.session.ListRoots(t.ctx, p)
	if err != nil {
		return nil, relayError(method, err)
	}
	return res, nil
}

// elicitationComplete passes an upstream's notice that a URL-mode
// elicitation completed to the caller the elicitation went to.
func (r *relay) elicitationComplete(ctx context.Context, req *sdk.ElicitationCompleteNotificationRequest) {
	if req.Params == nil {
		return
	}
	caller, ok := r.elicitations.take(req.Session, req.Params.ElicitationID)
	if !ok {
		r.logger.Debug("upstream: an elicitation completion names no elicitation passed on; dropped")
		return
	}
	if err := caller.NotifyElicitationComplete(ctx, &sdk.ElicitationCompleteParams{ElicitationID: req.Params.ElicitationID}); err != nil {
		r.logger.Debug("upstream: passing on an elicitation completion failed", "error", err)
	}
}
