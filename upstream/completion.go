package upstream

import (
	"context"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// complete forwards a completion request for one of the upstream's
// prompts (named as served) or resource templates.
func (u *proxy) complete(ctx context.Context, req *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
	ref := *req.Params.Ref
	if ref.Type == "ref/prompt" && u.prefix != "" {
		ref.Name = strings.TrimPrefix(ref.Name, u.prefix+"_")
	}
	ctx, done := u.start(ctx, "completion/complete", ref.Name+ref.URI)
	sess, release, err := u.sessionFor(ctx, req.Extra)
	if err != nil {
		done(KindUnavailable)
		return nil, u.fail.requestError(KindUnavailable, err)
	}
	defer release()
	res, err := sess.Complete(ctx, &sdk.CompleteParams{Ref: &ref, Argument: req.Params.Argument, Context: req.Params.Context, Meta: u.meta(ctx)})
	kind := u.sup.classify(ctx, sess, err)
	done(kind)
	if err != nil {
		return nil, u.fail.requestError(kind, err)
	}
	return res, nil
}
