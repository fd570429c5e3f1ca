//lint:file-ignore SA1019 a legacy session keeps the log level a client of a revision before 2026-07-28 set, which that revision deprecates

package mcp

import (
	"context"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// principalKeyContext carries the caller's limits key from the HTTP
// handler to the middleware that writes the record at initialize.
type principalKeyContext struct{}

// sessionRecordMiddleware writes a legacy session's record when the SDK
// initializes it, and keeps the level logging/setLevel sets and the
// resources the client subscribes to. A record that cannot be written
// fails the initialize: a session without one is not found on any
// replica.
func sessionRecordMiddleware(s *sharedSessions) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			ss, ok := req.GetSession().(*sdk.ServerSession)
			if !ok || ss == nil || ss.ID() == "" {
				return res, err
			}
			switch r := req.(type) {
			case *sdk.ServerRequest[*sdk.InitializeParams]:
				ir, ok := res.(*sdk.InitializeResult)
				if !ok {
					return res, err
				}
				if werr := s.record(ctx, ss, r.Params, ir); werr != nil {
					s.logger.ErrorContext(ctx, "writing a session record", "error", werr)
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "The session could not be recorded. Retry the initialize."}
				}
			case *sdk.ServerRequest[*sdk.SetLoggingLevelParams]:
				if r.Params == nil {
					return res, err
				}
				if werr := s.setLevel(ctx, ss, r.Params.Level); werr != nil {
					s.logger.WarnContext(ctx, "keeping a session's log level", "error", werr)
				}
			case *sdk.SubscribeRequest:
				if werr := s.subscribed(ctx, ss, r.Params.URI, true); werr != nil {
					s.logger.WarnContext(ctx, "keeping a session's subscription", "error", werr)
				}
			case *sdk.UnsubscribeRequest:
				if werr := s.subscribed(ctx, ss, r.Params.URI, false); werr != nil {
					s.logger.WarnContext(ctx, "keeping a session's subscription", "error", werr)
				}
			}
			return res, err
		}
	}
}

// copyOf returns this replica's copy held for ss, or nil.
func (s *sharedSessions) copyOf(ss *sdk.ServerSession) *sessionCopy {
	if c := s.copies.lookup(ss.ID()); c != nil && c.ss == ss {
		return c
	}
	return nil
}

// record writes the record of a session that a copy of this replica just
// initialized, before the client gets its id.
func (s *sharedSessions) record(ctx context.Context, ss *sdk.ServerSession, params *sdk.InitializeParams, res *sdk.InitializeResult) error {
	key, _ := ctx.Value(principalKeyContext{}).(string)
	rec := sharedsession.Record{Principal: sharedsession.PrincipalHash(key), ProtocolVersion: res.ProtocolVersion, Initialize: params}
	m := s.copies.mark()
	if err := s.store.Put(ctx, sharedsession.Key(ss.ID()), rec, s.ttl); err != nil {
		return err
	}
	if c := s.copyOf(ss); c != nil {
		s.copies.noteRead(c, m, rec.ProtocolVersion)
	}
	return nil
}

// setLevel keeps a level the client set in the session's record, and
// notes it on this replica's copy, ss.
func (s *sharedSessions) setLevel(ctx context.Context, ss *sdk.ServerSession, level sdk.LoggingLevel) error {
	if c := s.copyOf(ss); c != nil {
		c.mu.Lock()
		c.level = level
		c.mu.Unlock()
	}
	key := sharedsession.Key(ss.ID())
	rec, ok, err := s.store.Get(ctx, key, s.ttl)
	if err != nil || !ok || rec.LogLevel == level {
		return err // a copy following the record, or nothing to keep
	}
	rec.LogLevel = level
	if err := s.store.Put(ctx, key, rec, s.ttl); err != nil {
		return err
	}
	// The other replicas' copies, trusted, read the record again.
	return s.bus.publish(ctx, busMessage{Kind: busRecord, Key: key})
}

// subscribed keeps in the session's record that its copy ss subscribed to
// uri (or unsubscribed, when !on), and tells the replicas whose stream of
// the session must follow it.
func (s *sharedSessions) subscribed(ctx context.Context, ss *sdk.ServerSession, uri string, on bool) error {
	if c := s.copyOf(ss); c != nil {
		c.mu.Lock()
		if on {
			c.subscribed[uri] = true
		} else {
			delete(c.subscribed, uri)
		}
		c.mu.Unlock()
	}
	key := sharedsession.Key(ss.ID())
	rec, ok, err := s.store.Get(ctx, key, s.ttl)
	if err != nil || !ok {
		return err
	}
	if slices.Contains(rec.Subscriptions, uri) == on {
		return nil // a copy following the record
	}
	if on {
		rec.Subscriptions = append(rec.Subscriptions, uri)
	} else {
		rec.Subscriptions = slices.DeleteFunc(rec.Subscriptions, func(u string) bool { return u == uri })
	}
	if err := s.store.Put(ctx, key, rec, s.ttl); err != nil {
		return err
	}
	return s.bus.publish(ctx, busMessage{Kind: busSubscriptions, Key: key})
}

// syncLevel sets the level of the copy c to level, the record's, as the
// client's logging/setLevel would, when the client set another on another
// replica. The SDK offers no other way to set a session's level.
func (s *sharedSessions) syncLevel(ctx context.Context, c *sessionCopy, level sdk.LoggingLevel) {
	c.mu.Lock()
	same := c.level == level
	c.mu.Unlock()
	if same || level == "" {
		return
	}
	if code := c.request(ctx, "logging/setLevel", map[string]any{"level": level}); code != http.StatusOK {
		s.logger.WarnContext(ctx, "following a session's log level", "level", level, "status", code)
	}
}

// syncSubscriptions subscribes the copy c of the session keyed key to the
// resources its record names, and unsubscribes it from those it no longer
// names, as the client would: the stream on this replica then carries
// their updates even when the client subscribed on another.
func (s *sharedSessions) syncSubscriptions(ctx context.Context, key string, c *sessionCopy) {
	rec, ok, err := s.store.Get(ctx, key, s.ttl)
	if err != nil || !ok {
		return
	}
	c.mu.Lock()
	var add, drop []string
	for _, u := range rec.Subscriptions {
		if !c.subscribed[u] {
			add = append(add, u)
		}
	}
	for u := range c.subscribed {
		if !slices.Contains(rec.Subscriptions, u) {
			drop = append(drop, u)
		}
	}
	c.mu.Unlock()
	for i, u := range append(add, drop...) {
		method := "resources/subscribe"
		if i >= len(add) {
			method = "resources/unsubscribe"
		}
		if code := c.request(ctx, method, map[string]any{"uri": u}); code != http.StatusOK {
			s.logger.WarnContext(ctx, "following a session's subscription", "uri", u, "status", code)
		}
	}
}
