package portcullis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/portcullis-mcp/portcullis/mcp"
)

// redisSessionStore is the [mcp.SessionStore] in Redis: one key per
// session, prefix "session:" [mcp.SessionKey] of its id, holding the
// record as JSON and expiring after the idle timeout, which a read
// restarts (GETEX) in the same round trip.
type redisSessionStore struct {
	rdb    redis.UniversalClient
	prefix string
}

func (s *redisSessionStore) key(id string) string { return s.prefix + "session:" + mcp.SessionKey(id) }

// Put implements [mcp.SessionStore].
func (s *redisSessionStore) Put(ctx context.Context, id string, rec mcp.SessionRecord, ttl time.Duration) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("portcullis: encoding a session record: %w", err)
	}
	if err := s.rdb.Set(ctx, s.key(id), b, ttl).Err(); err != nil {
		return fmt.Errorf("portcullis: writing a session record: %w", err)
	}
	return nil
}

// Get implements [mcp.SessionStore].
func (s *redisSessionStore) Get(ctx context.Context, id string, ttl time.Duration) (mcp.SessionRecord, bool, error) {
	var rec mcp.SessionRecord
	b, err := s.rdb.GetEx(ctx, s.key(id), ttl).Bytes()
	if errors.Is(err, redis.Nil) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, fmt.Errorf("portcullis: reading a session record: %w", err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, false, fmt.Errorf("portcullis: decoding a session record: %w", err)
	}
	return rec, true, nil
}

// Delete implements [mcp.SessionStore].
func (s *redisSessionStore) Delete(ctx context.Context, id string) error {
	if err := s.rdb.Del(ctx, s.key(id)).Err(); err != nil {
		return fmt.Errorf("portcullis: deleting a session record: %w", err)
	}
	return nil
}

// newSessionStore returns the legacy session store cfg.MCP.SessionStore
// names, and the log of the sessions' event streams that goes with it:
// both in Redis when it says so, or by default when Redis is configured;
// nil for memory, where each session stays on the replica that made it.
func newSessionStore(cfg *configFile, rdb redis.UniversalClient) (mcp.SessionStore, mcp.SessionEvents, error) {
	switch {
	case cfg.MCP.SessionStore == "memory", cfg.MCP.SessionStore == "" && rdb == nil:
		return nil, nil, nil
	case rdb == nil:
		return nil, nil, fmt.Errorf("mcp.session_store: redis needs a Redis (redis.url, redis.sentinel or redis.cluster)")
	}
	return &redisSessionStore{rdb: rdb, prefix: cfg.Redis.KeyPrefix}, newRedisSessionEvents(rdb, cfg.Redis.KeyPrefix), nil
}
