package mcp

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
)

// Curation. A server built with an exposure ([Deps.Exposure]) has on its
// SDK server only what the exposure selects, under the names the root
// server has them by, and serves it through its view of the catalog (see
// [catalog.Catalog.RegisterView]). Its callers see another server: the
// names the view exposes, with the titles, descriptions, annotations and
// input schemas it gives them. The middleware here is the one place that
// translates, innermost, so that every other layer (telemetry, the tool
// gate and the policy, tasks, requestState sealing, the tool timeout)
// sees the request as the caller sent it:
//
//   - tools/list, prompts/list, resources/list and
//     resources/templates/list results are rewritten as the view exposes
//     them;
//   - a tools/call of an exposed name calls the original tool, with the
//     view's fixed arguments set and its defaults for arguments left out;
//     a call that names a fixed argument itself, in any letter case, or
//     an argument with a default in another letter case than its own, is
//     refused with -32602 and never reaches the tool;
//   - a call of any other name of the catalog (the original name of a
//     renamed tool, a tool the view leaves out) is refused as an unknown
//     tool, which the tool gate, asking the view, has already done;
//   - prompts/get is mapped likewise; an unexposed prompt is an unknown
//     prompt, as the SDK answers one;
//   - a subscription to a resource the view does not expose is refused
//     as a resource that does not exist, and a completion of an unexposed
//     prompt or template offers nothing.
//
// The HTTP handler's direct calls run the same middleware, and look the
// direct handler up by the exposed name.

// curateMiddleware serves the view v of the server's catalog.
func curateMiddleware(v *catalog.ServerView) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			switch r := req.(type) {
			case *sdk.CallToolRequest:
				if r.Params != nil {
					return callCurated(ctx, v, next, method, r)
				}
			case *sdk.ListToolsRequest:
				res, err := next(ctx, method, req)
				if list, ok := res.(*sdk.ListToolsResult); ok && err == nil {
					out := *list
					out.Tools = v.Tools(list.Tools)
					return &out, nil
				}
				return res, err
			case *sdk.GetPromptRequest:
				if r.Params == nil {
					break
				}
				original, ok := v.Prompt(r.Params.Name)
				if !ok {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", r.Params.Name)}
				}
				if original != r.Params.Name {
					params := *r.Params
					params.Name = original
					get := *r
					get.Params = &params
					return next(ctx, method, &get)
				}
			case *sdk.ListPromptsRequest:
				res, err := next(ctx, method, req)
				if list, ok := res.(*sdk.ListPromptsResult); ok && err == nil {
					out := *list
					out.Prompts = v.Prompts(list.Prompts)
					return &out, nil
				}
				return res, err
			case *sdk.ListResourcesRequest:
				res, err := next(ctx, method, req)
				if list, ok := res.(*sdk.ListResourcesResult); ok && err == nil {
					out := *list
					out.Resources = v.Resources(list.Resources)
					return &out, nil
				}
				return res, err
			case *sdk.ListResourceTemplatesRequest:
				res, err := next(ctx, method, req)
				if list, ok := res.(*sdk.ListResourceTemplatesResult); ok && err == nil {
					out := *list
					out.ResourceTemplates = v.Templates(list.ResourceTemplates)
					return &out, nil
				}
				return res, err
			case *sdk.SubscribeRequest:
				if r.Params != nil && !v.ServesResource(r.Params.URI) {
					return nil, sdk.ResourceNotFoundError(r.Params.URI)
				}
			case *sdk.CompleteRequest:
				if r.Params != nil && r.Params.Ref != nil {
					return completeCurated(ctx, v, next, method, r)
				}
			}
			return next(ctx, method, req)
		}
	}
}

// callCurated calls the tool the caller calls by r's name.
func callCurated(ctx context.Context, v *catalog.ServerView, next sdk.MethodHandler, method string, r *sdk.CallToolRequest) (sdk.Result, error) {
	name := r.Params.Name
	t, ok := v.Tool(name)
	if !ok {
		if v.HasTool(name) {
			// A tool added to the server while it serves: as it is.
			return next(ctx, method, r)
		}
		// The tool gate answers first, naming the tools the caller sees.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("Unknown tool: %q.", name)}
	}
	if !t.Curated() {
		return next(ctx, method, r)
	}
	args, err := t.Arguments(r.Params.Arguments)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("Invalid params: tool %q: %v.", name, err)}
	}
	params := *r.Params
	params.Name, params.Arguments = t.Original, args
	call := *r
	call.Params = &params
	return next(ctx, method, &call)
}

// completeCurated answers a completion request of a prompt by the
// prompt's original name, and one of a prompt or template the view does
// not expose with no values.
func completeCurated(ctx context.Context, v *catalog.ServerView, next sdk.MethodHandler, method string, r *sdk.CompleteRequest) (sdk.Result, error) {
	none := &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: []string{}}}
	switch ref := r.Params.Ref; ref.Type {
	case "ref/prompt":
		original, ok := v.Prompt(ref.Name)
		if !ok {
			return none, nil
		}
		if original != ref.Name {
			nref := *ref
			nref.Name = original
			params := *r.Params
			params.Ref = &nref
			c := *r
			c.Params = &params
			return next(ctx, method, &c)
		}
	case "ref/resource":
		if !v.ServesTemplate(ref.URI) {
			return none, nil
		}
	}
	return next(ctx, method, r)
}
