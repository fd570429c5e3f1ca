//lint:file-ignore SA1019 a legacy session keeps the log level a client of a revision before 2026-07-28 set, which that revision deprecates

package sharedsession

import (
	"context"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Store is the registry of legacy sessions that every replica consults. It
// holds a [Record] per session, under the session's [Key]; a session
// without a record is no session, on every replica. Implementations must
// be safe for concurrent use.
type Store interface {
	// Put writes the record of the session keyed key, to expire after ttl
	// without a Get.
	Put(ctx context.Context, key string, rec Record, ttl time.Duration) error
	// Get returns the record of the session keyed key and restarts its
	// ttl, in one step; ok is false when there is none (never written,
	// deleted, or expired).
	Get(ctx context.Context, key string, ttl time.Duration) (rec Record, ok bool, err error)
	// Delete removes the record of the session keyed key; deleting none is
	// no error.
	Delete(ctx context.Context, key string) error
}

// Record is what a replica needs to serve a session it did not create:
// who owns it and what was negotiated. It holds no token and not the
// session id.
type Record struct {
	// Principal is [PrincipalHash] of the caller that initialized the
	// session; empty when it had none (auth off).
	Principal string `json:"principal,omitempty"`
	// ProtocolVersion is the version negotiated at initialize.
	ProtocolVersion string `json:"protocolVersion"`
	// Initialize is what the client sent in initialize: its capabilities,
	// clientInfo and requested protocol version.
	Initialize *sdk.InitializeParams `json:"initialize"`
	// LogLevel is the level the client last set with logging/setLevel;
	// empty until it sets one.
	LogLevel sdk.LoggingLevel `json:"logLevel,omitempty"`
	// Subscriptions are the URIs of the resources the client subscribed
	// to, on any replica, and has not unsubscribed from.
	Subscriptions []string `json:"subscriptions,omitempty"`
}

// MemoryStore is a [Store] in process memory. Expired records are
// dropped when looked up and on every Put.
type MemoryStore struct {
	now func() time.Time

	mu   sync.Mutex
	recs map[string]memoryRecord
}

type memoryRecord struct {
	rec     Record
	expires time.Time
}

// NewMemoryStore returns an empty store on the clock now; nil means
// [time.Now].
func NewMemoryStore(now func() time.Time) *MemoryStore {
	if now == nil {
		now = time.Now
	}
	return &MemoryStore{now: now, recs: map[string]memoryRecord{}}
}

// Put implements [Store].
func (s *MemoryStore) Put(_ context.Context, key string, rec Record, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, m := range s.recs {
		if !now.Before(m.expires) {
			delete(s.recs, k)
		}
	}
	s.recs[key] = memoryRecord{rec: rec, expires: now.Add(ttl)}
	return nil
}

// Get implements [Store].
func (s *MemoryStore) Get(_ context.Context, key string, ttl time.Duration) (Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.recs[key]
	now := s.now()
	if !ok || !now.Before(m.expires) {
		delete(s.recs, key)
		return Record{}, false, nil
	}
	m.expires = now.Add(ttl)
	s.recs[key] = m
	return m.rec, true, nil
}

// Delete implements [Store].
func (s *MemoryStore) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.recs, key)
	return nil
}
