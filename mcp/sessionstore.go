//lint:file-ignore SA1019 a legacy session keeps the log level a client of a revision before 2026-07-28 set, which that revision deprecates

package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// SessionStore is the registry of legacy sessions that every replica
// consults, so that any replica can serve any request of a session (see
// [Deps.Sessions]). It holds a [SessionRecord] per session id; an id
// without a record is no session, on every replica.
//
// Implementations key records by [SessionKey], never by the raw id, and
// must be safe for concurrent use.
type SessionStore interface {
	// Put writes the record of session id, to expire after ttl without a
	// Get.
	Put(ctx context.Context, id string, rec SessionRecord, ttl time.Duration) error
	// Get returns the record of session id and restarts its ttl, in one
	// step; ok is false when there is none (never written, deleted, or
	// expired).
	Get(ctx context.Context, id string, ttl time.Duration) (rec SessionRecord, ok bool, err error)
	// Delete removes the record of session id; deleting none is no error.
	Delete(ctx context.Context, id string) error
}

// SessionRecord is what a replica needs to serve a session it did not
// create: who owns it and what was negotiated. It holds no token and not
// the session id.
type SessionRecord struct {
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

// SessionKey is the key a [SessionStore] files session id under: the
// first 32 hex digits of its SHA-256, so that the store never holds an id
// a caller could present.
func SessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
}

// PrincipalHash is the [SessionRecord.Principal] of a caller with the
// limits key key: its SHA-256 in hex, or empty for the empty key.
func PrincipalHash(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// MemorySessionStore is a [SessionStore] in process memory: for tests and
// for replicas that share a process. Expired records are dropped when
// looked up and on every Put.
type MemorySessionStore struct {
	now func() time.Time

	mu   sync.Mutex
	recs map[string]memorySession
}

type memorySession struct {
	rec     SessionRecord
	expires time.Time
}

// NewMemorySessionStore returns an empty store on the clock now; nil means
// [time.Now].
func NewMemorySessionStore(now func() time.Time) *MemorySessionStore {
	if now == nil {
		now = time.Now
	}
	return &MemorySessionStore{now: now, recs: map[string]memorySession{}}
}

// Put implements [SessionStore].
func (s *MemorySessionStore) Put(_ context.Context, id string, rec SessionRecord, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, m := range s.recs {
		if !now.Before(m.expires) {
			delete(s.recs, k)
		}
	}
	s.recs[SessionKey(id)] = memorySession{rec: rec, expires: now.Add(ttl)}
	return nil
}

// Get implements [SessionStore].
func (s *MemorySessionStore) Get(_ context.Context, id string, ttl time.Duration) (SessionRecord, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := SessionKey(id)
	m, ok := s.recs[k]
	now := s.now()
	if !ok || !now.Before(m.expires) {
		delete(s.recs, k)
		return SessionRecord{}, false, nil
	}
	m.expires = now.Add(ttl)
	s.recs[k] = m
	return m.rec, true, nil
}

// Delete implements [SessionStore].
func (s *MemorySessionStore) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.recs, SessionKey(id))
	return nil
}
