package upstream

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// getPrompt returns the handler of the upstream prompt called name: the
// caller's prompts/get, forwarded.
func (u *proxy) getPrompt(name string) sdk.PromptHandler {
	return func(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		r, err := u.forward(ctx, "prompts/get", name, req.Extra, req.Session, req.Params.RequestState, req.Params.InputResponses,
			func(ctx context.Context, sess *sdk.ClientSession, s sender, t *callTarget, responses sdk.InputResponseMap, state string) (sdk.Result, error) {
				p := &sdk.GetPromptParams{Name: name, Arguments: req.Params.Arguments, Meta: callerMeta(u.meta(ctx), sess, req, req.Params.Meta), InputResponses: responses, RequestState: state}
				return s.getPrompt(ctx, t, p)
			})
		if err != nil {
			return nil, err
		}
		return r.(*sdk.GetPromptResult), nil
	}
}
