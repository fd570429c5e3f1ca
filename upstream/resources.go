package upstream

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// readResource is the handler of the upstream's resources and resource
// templates: the caller's resources/read, forwarded.
func (u *proxy) readResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	r, err := u.forward(ctx, "resources/read", req.Params.URI, req.Extra, req.Session, req.Params.RequestState, req.Params.InputResponses,
		func(ctx context.Context, sess *sdk.ClientSession, s sender, t *callTarget, responses sdk.InputResponseMap, state string) (sdk.Result, error) {
			p := &sdk.ReadResourceParams{URI: req.Params.URI, Meta: callerMeta(u.meta(ctx), sess, req, req.Params.Meta), InputResponses: responses, RequestState: state}
			return s.readResource(ctx, t, p)
		})
	if err != nil {
		return nil, err
	}
	return r.(*sdk.ReadResourceResult), nil
}
