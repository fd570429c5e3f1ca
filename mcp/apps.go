package mcp

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP Apps. An App (io.modelcontextprotocol/ui), shown by the host, calls
// its server's tools through the host by the names its server gave them,
// not by the names this server lists them under (an upstream's prefix, a
// virtual server's expose_as). A tools/call of a name no tool is listed
// by, which a tool of an upstream serving Apps has in that upstream (see
// [catalog.Catalog.AppTool]), calls that tool by its listed name when
// exactly one such tool the caller sees is served here; when several are,
// it is refused with an error that names them, never guessed.
//
// An App reads its server's resources by their URIs in the server, too,
// where this server serves an upstream's ui:// URIs under its prefix
// (package upstream): a resources/read, subscription or unsubscription of
// a URI no resource is served by, which is an App resource's URI in an
// upstream serving Apps, is one of that resource when one such resource
// is served here (its contents come back under the URI the App asked
// for); when several are, it is refused with an error that names them.
//
// The name is resolved first, outermost in the SDK middleware and before
// the HTTP handler's tool gate and direct calls, so that everything that
// holds for the listed name holds for the name used: the policy and its
// scopes, a virtual server's selection and fixed arguments, tasks, the
// tool timeout, metrics and spans (which name the listed tool; the audit
// line names both, see [CalledAs]). A tool the caller does not see is not
// reached by any name, and does not count as one a name could stand for.

// appTools is what the gate asks of its [Tools] that serve MCP Apps: the
// listed names of the tools an upstream names name itself, and the listed
// URIs of the resources an upstream gives uri itself, sorted.
// *catalog.Catalog and *catalog.ServerView are.
type appTools interface {
	AppTool(name string) []string
	AppResource(uri string) []string
}

type calledAsKey struct{}

// CalledAs returns the name a tools/call named its tool by when that is
// not the name the tool is listed by (an App's call by its upstream's
// name), for the audit line; "" otherwise. The request the middleware
// and the handler see names the listed tool.
func CalledAs(ctx context.Context) string {
	s, _ := ctx.Value(calledAsKey{}).(string)
	return s
}

func withCalledAs(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, calledAsKey{}, name)
}

// ambiguousToolError is the answer to a call of a name that stands for
// several tools.
func ambiguousToolError(name string, listed []string) *jsonrpc.Error {
	return &jsonrpc.Error{
		Code: jsonrpc.CodeInvalidParams,
		Message: fmt.Sprintf("Ambiguous tool name: %q is the name %d upstream servers give a tool here; call one of them by the name it is listed by: %s. (An App calls its server's tools by its server's names; serve each App's server on a virtual server of its own to keep them apart.)",
			name, len(listed), `"`+strings.Join(listed, `", "`)+`"`),
	}
}

// resolveResource serves a resources/read, subscription or
// unsubscription of an App resource by its URI in its upstream (see
// above); any other request goes on as it is.
func resolveResource(ctx context.Context, apps appTools, next sdk.MethodHandler, method string, req sdk.Request) (sdk.Result, error) {
	var uri *string
	switch r := req.(type) {
	case *sdk.ReadResourceRequest:
		if r.Params != nil {
			uri = &r.Params.URI
		}
	case *sdk.SubscribeRequest:
		if r.Params != nil {
			uri = &r.Params.URI
		}
	case *sdk.UnsubscribeRequest:
		if r.Params != nil {
			uri = &r.Params.URI
		}
	}
	if uri == nil {
		return next(ctx, method, req)
	}
	served := apps.AppResource(*uri)
	switch len(served) {
	case 0:
		return next(ctx, method, req)
	case 1:
	default:
		return nil, &jsonrpc.Error{
			Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("Ambiguous resource URI: %q is the URI %d upstream servers give a resource here; use the one it is listed by: %s.",
				*uri, len(served), `"`+strings.Join(served, `", "`)+`"`),
		}
	}
	own := *uri
	switch r := req.(type) {
	case *sdk.ReadResourceRequest:
		params := *r.Params
		params.URI = served[0]
		read := *r
		read.Params = &params
		res, err := next(ctx, method, &read)
		if rr, ok := res.(*sdk.ReadResourceResult); ok && err == nil {
			for _, c := range rr.Contents {
				if c != nil && c.URI == served[0] {
					c.URI = own
				}
			}
		}
		return res, err
	case *sdk.SubscribeRequest:
		params := *r.Params
		params.URI = served[0]
		sub := *r
		sub.Params = &params
		return next(ctx, method, &sub)
	case *sdk.UnsubscribeRequest:
		params := *r.Params
		params.URI = served[0]
		unsub := *r
		unsub.Params = &params
		return next(ctx, method, &unsub)
	}
	return next(ctx, method, req)
}
