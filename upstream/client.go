package upstream

import (
	"context"
	"log/slog"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/mcpapps"
)

// newClient returns the SDK client an upstream's sessions are opened
// with, named impl. Its handlers are the relay's: what the upstream sends
// besides its answers goes to r, and the count of each session's awaited
// notifications handled to its notes (l).
func newClient(impl *sdk.Implementation, logger *slog.Logger, r *relay, l *links, apps bool) *sdk.Client {
	caps := &sdk.ClientCapabilities{
		Elicitation: &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}, URL: &sdk.URLElicitationCapabilities{}},
		//lint:ignore SA1019 the 2026-07-28 revision deprecates MCP logging, sampling and roots; clients of earlier revisions still use them
		RootsV2: &sdk.RootCapabilities{},
	}
	if apps {
		// One session serves callers that render Apps and callers that
		// do not: the extension requires a text result of every App's
		// tool, which the others get (Options.AppsExtension).
		caps.AddExtension(mcpapps.ExtensionID, mcpapps.Capability())
	}
	c := sdk.NewClient(impl, &sdk.ClientOptions{
		Logger: logger,
		// Elicitation, sampling and roots are offered so that an upstream
		// of an older era may ask its caller during a call (relay.go); a
		// caller that cannot answer has the request refused. A 2026-07-28
		// upstream is sent the caller's own capabilities with each call
		// instead (caller.go); Portcullis's own requests, such as its
		// lists, carry these.
		Capabilities: caps,
		// A 2026-07-28 upstream's input-required results are passed to
		// the caller or fulfilled by Portcullis itself (mrtr.go), never by
		// the SDK client.
		MultiRoundTrip:             &sdk.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler:         r.elicit,
		ElicitationCompleteHandler: r.elicitationComplete,
		//lint:ignore SA1019 the 2026-07-28 revision deprecates MCP logging, sampling and roots; clients of earlier revisions still use them
		CreateMessageWithToolsHandler: r.createMessage,
		//lint:ignore SA1019 the 2026-07-28 revision deprecates MCP logging, sampling and roots; clients of earlier revisions still use them
		LoggingMessageHandler:      r.log,
		ToolListChangedHandler:     func(context.Context, *sdk.ToolListChangedRequest) { r.listChanged() },
		PromptListChangedHandler:   func(context.Context, *sdk.PromptListChangedRequest) { r.listChanged() },
		ResourceListChangedHandler: func(context.Context, *sdk.ResourceListChangedRequest) { r.listChanged() },
		ProgressNotificationHandler: func(ctx context.Context, req *sdk.ProgressNotificationClientRequest) {
			r.progress(ctx, req.Params)
		},
		ResourceUpdatedHandler: func(ctx context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			r.resourceUpdated(ctx, req.Params.URI)
		},
	})
	registerTaskMethods(c)
	c.AddReceivingMiddleware(receiving(r, l))
	return c
}

// receiving returns the middleware of the client's incoming messages: it
// refuses every request of an upstream on 2026-07-28 or later
// (refuseStateless), counts the awaited notifications handled, and
// passes elicitation requests to
// the caller itself (see relay.go) without the SDK client's check of the
// schema, which refuses forms the caller may well show (titled
// multi-select).
func receiving(r *relay, l *links) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if cs, ok := req.GetSession().(*sdk.ClientSession); ok && !strings.HasPrefix(method, "notifications/") {
				if v := protocolVersion(cs); v >= statelessEra {
					return nil, r.refuseStateless(method, v)
				}
			}
			if awaited[method] {
				if cs, ok := req.GetSession().(*sdk.ClientSession); ok {
					if n := l.notesOf(cs); n != nil {
						defer n.addHandled()
					}
				}
			}
			if er, ok := req.(*sdk.ElicitRequest); ok && method == "elicitation/create" {
				res, err := r.elicit(ctx, er)
				if err != nil {
					return nil, err
				}
				return res, nil
			}
			if lr, ok := req.(*sdk.ListRootsRequest); ok && method == "roots/list" {
				res, err := r.listRoots(ctx, lr)
				if err != nil {
					return nil, err
				}
				return res, nil
			}
			return next(ctx, method, req)
		}
	}
}
