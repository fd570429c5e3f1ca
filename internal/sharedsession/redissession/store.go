package redissession

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/rediskit"
	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// Store is the [sharedsession.Store] in Redis: one key per session,
// prefix "session:" and the session's key, holding the record as JSON and
// expiring after the idle timeout, which a read restarts (GETEX) in the
// same round trip. A record is written as the [rediskit.Client]'s
// durability says: a session whose record a failover could lose fails to
// be made ([rediskit.ErrNotReplicated]) rather than vanish later.
type Store struct {
	records *rediskit.Values
}

// NewStore returns the store of records in kit's Redis under prefix.
func NewStore(kit *rediskit.Client, prefix string) *Store {
	return &Store{records: kit.Values(prefix + "session:")}
}

// Put implements [sharedsession.Store].
func (s *Store) Put(ctx context.Context, key string, rec sharedsession.Record, ttl time.Duration) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("redissession: encoding a session record: %w", err)
	}
	if err := s.records.Set(ctx, key, b, ttl); err != nil {
		return fmt.Errorf("redissession: writing a session record: %w", err)
	}
	return nil
}

// Get implements [sharedsession.Store].
func (s *Store) Get(ctx context.Context, key string, ttl time.Duration) (sharedsession.Record, bool, error) {
	var rec sharedsession.Record
	b, ok, err := s.records.GetEx(ctx, key, ttl)
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("redissession: reading a session record: %w", err)
		}
		return rec, false, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, false, fmt.Errorf("redissession: decoding a session record: %w", err)
	}
	return rec, true, nil
}

// Delete implements [sharedsession.Store].
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.records.Del(ctx, key); err != nil {
		return fmt.Errorf("redissession: deleting a session record: %w", err)
	}
	return nil
}
