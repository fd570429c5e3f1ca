package upstream

import (
	"context"
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

// forwardProgress passes an upstream's progress notification to the caller
// whose call it is about, under the caller's own token.
func (u *upstream) forwardProgress(ctx context.Context, req *sdk.ProgressNotificationClientRequest) {
	tok, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := u.progress.Load(tok)
	if !ok {
		return
	}
	t := v.(progressTarget)
	p := *req.Params
	p.ProgressToken = t.token
	// After the call, its context is done; the notification goes out
	// with the notification's own then.
	nctx := t.ctx
	if nctx.Err() != nil {
		nctx = ctx
	}
	if err := t.session.NotifyProgress(nctx, &p); err != nil {
		u.logger.Debug("upstream: passing on progress failed", "error", err)
	}
}
