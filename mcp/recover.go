package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/tasks"
)

// recoverMiddleware turns a panic in a handler into an error: a tool result
// with IsError for tools/call, an internal JSON-RPC error otherwise. The
// process lives on.
func recoverMiddleware(logger *slog.Logger) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (res sdk.Result, err error) {
			defer func() {
				p := recover()
				if p == nil {
					return
				}
				target := ""
				if r, ok := req.(*sdk.CallToolRequest); ok && r.Params != nil {
					target = r.Params.Name
				}
				logger.ErrorContext(ctx, "handler panicked",
					"mcp.method.name", method, "target", target,
					"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if method == "tools/call" && tasks.TaskID(ctx) == "" {
					res = &sdk.CallToolResult{
						IsError: true,
						Content: []sdk.Content{&sdk.TextContent{
							Text: fmt.Sprintf("The tool %q failed with an internal error. This is a bug in the server, not in your request; retrying will likely fail the same way.", target),
						}},
					}
					err = nil
					return
				}
				res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
			}()
			return next(ctx, method, req)
		}
	}
}
