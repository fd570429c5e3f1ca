package upstream

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// sender sends a caller's request to one upstream session, and returns
// the upstream's result or its JSON-RPC error (a *jsonrpc.Error). There
// are two: the SDK client session (clientSender) and the session's direct
// hop (hop.go), chosen per request (links.senderFor). Everything around
// the request is the same code for both: the caller's _meta (caller.go),
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

// notices take what an upstream sends within a request besides its
// answer, which a sender that reads the answer itself (the direct hop)
// hands on; the relay is them, and the SDK client's handlers hand the
// same to it.
type notices interface {
	// progress passes a progress notification to the caller whose call
	// it is about.
	progress(ctx context.Context, p *sdk.ProgressNotificationParams)
	// logMessage passes a log message to the caller of t.
	//lint:ignore SA1019 the 2026-07-28 revision deprecates MCP logging; upstreams still send log messages within a call
	logMessage(t *callTarget, p *sdk.LoggingMessageParams)
	// listChanged says that one of the upstream's lists changed.
	listChanged()
	// resourceUpdated says that the upstream's resource uri was updated.
	resourceUpdated(ctx context.Context, uri string)
	// refuseStateless is the error a request of an upstream that speaks
	// protocol version (2026-07-28 or later) is answered with.
	refuseStateless(method, version string) error
}

// clientSender sends requests through the SDK client session sess. The
// SDK client hands what the upstream sends within a request to its
// handlers (client.go) on goroutines of its own, which find the caller by
// the request's context (targetKey) or by the calls in flight on sess
// (inflight).
type clientSender struct {
	sess *sdk.ClientSession
	// notes counts the session's awaited notifications; nil: none are.
	notes *notes
	// inflight records the calls in flight.
	inflight *inflight
}

func (c *clientSender) callTool(ctx context.Context, t *callTarget, capture *taskCapture, p *sdk.CallToolParams) (sdk.Result, error) {
	untrack := c.inflight.add(c.sess, t)
	defer untrack()
	// The upstream's progress and log messages sent before its result
	// reach the caller before the result does.
	if c.notes != nil {
		defer c.notes.wait(ctx)
	}
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

func (c *clientSender) getPrompt(ctx context.Context, t *callTarget, p *sdk.GetPromptParams) (sdk.Result, error) {
	res, err := c.sess.GetPrompt(context.WithValue(ctx, targetKey{}, t), p)
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (c *clientSender) readResource(ctx context.Context, t *callTarget, p *sdk.ReadResourceParams) (sdk.Result, error) {
	res, err := c.sess.ReadResource(context.WithValue(ctx, targetKey{}, t), p)
	if err != nil {
		return nil, err
	}
	return res, nil
}
