package upstream

import (
	"context"
	"strconv"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressGrace is how long after a call's result its progress
// notifications are still passed on.
const progressGrace = 2 * time.Second

// progressTarget is the caller a progress token sent upstream stands for.
type progressTarget struct {
	// ctx is the caller's request context: a notification sent with it
	// travels on the caller's call (its POST stream, the only one a
	// 2026-07-28 caller has).
	ctx     context.Context
	session *sdk.ServerSession
	token   any
}

// progressToken returns a progress token of Portcullis's own that stands
// for the caller's token tok, given in the request of ctx on session:
// progress the upstream sends under it goes to the caller under tok. The
// token is forgotten progressGrace after done is called (at the call's
// end): the SDK may hand over a progress notification after the result
// that followed it, and it still reaches the caller.
func (r *relay) progressToken(ctx context.Context, session *sdk.ServerSession, tok any) (ours string, done func()) {
	ours = "portcullis-" + strconv.FormatUint(r.nextToken.Add(1), 10)
	r.tokens.Store(ours, progressTarget{ctx: ctx, session: session, token: tok})
	return ours, func() { time.AfterFunc(progressGrace, func() { r.tokens.Delete(ours) }) }
}

// progress passes an upstream's progress notification to the caller
// whose call it is about, under the caller's own token.
func (r *relay) progress(ctx context.Context, params *sdk.ProgressNotificationParams) {
	tok, ok := params.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := r.tokens.Load(tok)
	if !ok {
		return
	}
	t := v.(progressTarget)
	p := *params
	p.ProgressToken = t.token
	// After the call, its context is done; the notification goes out
	// with the notification's own then.
	nctx := t.ctx
	if nctx.Err() != nil {
		nctx = ctx
	}
	if err := t.session.NotifyProgress(nctx, &p); err != nil {
		r.logger.Debug("upstream: passing on progress failed", "error", err)
	}
}
