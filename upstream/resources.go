package upstream

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/mcpapps"
)

// readResource is the handler of the upstream's resources and resource
// templates: the caller's resources/read, forwarded.
// An App resource is read by the upstream's own URI, and its contents
// come back under the URI it is served by (apps.go).
func (u *proxy) readResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri, ok := mcpapps.Upstream(u.prefix, req.Params.URI)
	if !ok {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	r, err := u.forward(ctx, "resources/read", req.Params.URI, req.Extra, req.Session, req.Params.RequestState, req.Params.InputResponses,
		func(ctx context.Context, sess *sdk.ClientSession, s sender, t *callTarget, responses sdk.InputResponseMap, state string) (sdk.Result, error) {
			p := &sdk.ReadResourceParams{URI: uri, Meta: callerMeta(u.meta(ctx), sess, req, req.Params.Meta), InputResponses: responses, RequestState: state}
			return s.readResource(ctx, t, p)
		})
	if err != nil {
		return nil, err
	}
	res := r.(*sdk.ReadResourceResult)
	if uri != req.Params.URI {
		for _, c := range res.Contents {
			if c != nil {
				c.URI = mcpapps.Served(u.prefix, c.URI)
			}
		}
	}
	return res, nil
}
