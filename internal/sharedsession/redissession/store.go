package redissession

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// Store is the [sharedsession.Store] in Redis: one key per session,
// prefix "session:" and the session's key, holding the record as JSON and
// expiring after the idle timeout, which a read restarts (GETEX) in the
// same round trip.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewStore returns the store of records in rdb under prefix.
func NewStore(rdb redis.UniversalClient, prefix string) *Store {
	return &Store{rdb: rdb, prefix: prefix}
}

func (s *Store) redisKey(key string) string { return s.prefix + "session:" + key }

// Put implements [sharedsession.Store].
func (s *Store) Put(ctx context.Context, key string, rec sharedsession.Record, ttl time.Duration) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("redissession: encoding a session record: %w", err)
	}
	if err := s.rdb.Set(ctx, s.redisKey(key), b, ttl).Err(); err != nil {
		return fmt.Errorf("redissession: writing a session record: %w", err)
	}
	return nil
}

// Get implements [sharedsession.Store].
func (s *Store) Get(ctx context.Context, key string, ttl time.Duration) (sharedsession.Record, bool, error) {
	var rec sharedsession.Record
	b, err := s.rdb.GetEx(ctx, s.redisKey(key), ttl).Bytes()
	if errors.Is(err, redis.Nil) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, fmt.Errorf("redissession: reading a session record: %w", err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, false, fmt.Errorf("redissession: decoding a session record: %w", err)
	}
	return rec, true, nil
}

// Delete implements [sharedsession.Store].
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.rdb.Del(ctx, s.redisKey(key)).Err(); err != nil {
		return fmt.Errorf("redissession: deleting a session record: %w", err)
	}
	return nil
}
