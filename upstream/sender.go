package upstream

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// sender sends a caller's request to one upstream session, and returns
// the upstream's result or its JSON-RPC error (a *jsonrpc.Error). There
// are two: the SDK client session (clientSender) and the session's direct
// hop (hop.go), chosen per request by senderFor. Everything around the
// request is the same code for both: the caller's _meta (caller.go),
// rounds of input (mrtr.go), task handles (tasks.go), errors (errors.go)
// and the StartCall hook. t is the caller the request is made for; what
// the upstream sends within the request goes to it (relay.go).
type sender interface {
	// callTool sends a tools/call. A task handle the upstream answers
	// with goes to capture, if not nil. A direct call (t.direct) may get
	// the upstream's complete result as it came, a
	// *catalog.RawToolResult; any other call a *sdk.CallToolResult.
	callTool(ctx context.Context, t *callTarget, capture *taskCapture, p *sdk.CallToolParams) (sdk.Result, error)
	// getPrompt sends a prompts/get; the result is a *sdk.GetPromptResult.
	getPrompt(ctx context.Context, t *callTarget, p *sdk.GetPromptParams) (sdk.Result, error)
	// readResource sends a resources/read; the result is a
	// *sdk.ReadResourceResult.
	readResource(ctx context.Context, t *callTarget, p *sdk.ReadResourceParams) (sdk.Result, error)
}

// senderFor returns the sender of a request on sess: its direct hop, or
// the SDK client session when sess has none (an upstream of an older era,
// a stdio upstream, one that keeps sessions) or the request is a call of
// tool (the upstream's name; "" for other requests) whose input schema
// binds arguments to headers, which the SDK client writes.
func (u *upstream) senderFor(sess *sdk.ClientSession, tool string) sender {
	if bound, _ := u.headerTools.Load().(map[string]bool); !bound[tool] {
		if h := u.hopOf(sess); h != nil {
			return h
		}
	}
	return clientSender{u: u, sess: sess}
}

// clientSender sends requests through the SDK client session sess. The
// SDK client hands what the upstream sends within a request to its
// handlers (relay.go, notes.go) on goroutines of its own, which find the
// caller by the request's context (targetKey) or by the calls in flight
// on sess (inflight).
type clientSender struct {
	u    *upstream
	sess *sdk.ClientSession
}

func (c clientSender) callTool(ctx context.Context, t *callTarget, capture *taskCapture, p *sdk.CallToolParams) (sdk.Result, error) {
	untrack := c.u.relay.inflight.add(c.sess, t)
	defer untrack()
	// The upstream's progress and log messages sent before its result
	// reach the caller before the result does.
	defer c.u.awaitNotes(ctx, c.sess)
	ctx = context.WithValue(ctx, targetKey{}, t)
	if capture != nil {
		ctx = withCapture(ctx, capture)
	}
	res, err := c.sess.CallTool(ctx, p)
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (c clientSender) getPrompt(ctx context.Context, t *callTarget, p *sdk.GetPromptParams) (sdk.Result, error) {
	res, err := c.sess.GetPrompt(context.WithValue(ctx, targetKey{}, t), p)
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (c clientSender) readResource(ctx context.Context, t *callTarget, p *sdk.ReadResourceParams) (sdk.Result, error) {
	res, err := c.sess.ReadResource(context.WithValue(ctx, targetKey{}, t), p)
	if err != nil {
		return nil, err
	}
	return res, nil
}
