package upstream

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/mcpapps"
)

// subscribe passes a caller's subscription to uri (as served: an App's
// under the prefix) on to the upstream, unless another caller's already
// did.
func (s *supervisor) subscribe(ctx context.Context, uri string) error {
	uri, ok := mcpapps.Upstream(s.prefix, uri)
	if !ok {
		return sdk.ResourceNotFoundError(uri)
	}
	s.subsMu.Lock()
	defer s.subsMu.Unlock()
	s.subs[uri]++
	if s.subs[uri] > 1 {
		return nil
	}
	sess := s.session()
	if sess == nil {
		return nil // subscribed when the upstream is back (resubscribe)
	}
	if err := sess.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
		if s.subs[uri]--; s.subs[uri] == 0 {
			delete(s.subs, uri)
		}
		return s.fail.requestError(s.classify(ctx, sess, err), err)
	}
	return nil
}

// unsubscribe ends a caller's subscription to uri, and the upstream's when
// it was the last.
func (s *supervisor) unsubscribe(ctx context.Context, uri string) error {
	uri, ok := mcpapps.Upstream(s.prefix, uri)
	if !ok {
		return nil
	}
	s.subsMu.Lock()
	defer s.subsMu.Unlock()
	if s.subs[uri] == 0 {
		return nil
	}
	if s.subs[uri]--; s.subs[uri] > 0 {
		return nil
	}
	delete(s.subs, uri)
	if sess := s.session(); sess != nil {
		if err := sess.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: uri}); err != nil {
			s.logger.Debug("upstream: unsubscribing failed", "error", err)
		}
	}
	return nil
}

// resubscribe renews the callers' subscriptions on a new session.
func (s *supervisor) resubscribe(ctx context.Context, sess *sdk.ClientSession) {
	s.subsMu.Lock()
	defer s.subsMu.Unlock()
	for uri := range s.subs {
		if err := sess.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
			s.logger.Warn("upstream: renewing a resource subscription failed", "error", err)
		}
	}
}
