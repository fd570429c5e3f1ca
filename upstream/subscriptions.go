package upstream

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// subscribe passes a caller's subscription to uri on to the upstream,
// unless another caller's already did.
func (u *upstream) subscribe(ctx context.Context, uri string) error {
	u.subsMu.Lock()
	defer u.subsMu.Unlock()
	u.subs[uri]++
	if u.subs[uri] > 1 {
		return nil
	}
	sess := u.session()
	if sess == nil {
		return nil // subscribed when the upstream is back (resubscribe)
	}
	if err := sess.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
		if u.subs[uri]--; u.subs[uri] == 0 {
			delete(u.subs, uri)
		}
		return u.requestError(u.classify(ctx, sess, err), err)
	}
	return nil
}

// unsubscribe ends a caller's subscription to uri, and the upstream's when
// it was the last.
func (u *upstream) unsubscribe(ctx context.Context, uri string) error {
	u.subsMu.Lock()
	defer u.subsMu.Unlock()
	if u.subs[uri] == 0 {
		return nil
	}
	if u.subs[uri]--; u.subs[uri] > 0 {
		return nil
	}
	delete(u.subs, uri)
	if sess := u.session(); sess != nil {
		if err := sess.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: uri}); err != nil {
			u.logger.Debug("upstream: unsubscribing failed", "error", err)
		}
	}
	return nil
}

// resubscribe renews the callers' subscriptions on a new session.
func (u *upstream) resubscribe(ctx context.Context, sess *sdk.ClientSession) {
	u.subsMu.Lock()
	defer u.subsMu.Unlock()
	for uri := range u.subs {
		if err := sess.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
			u.logger.Warn("upstream: renewing a resource subscription failed", "error", err)
		}
	}
}
