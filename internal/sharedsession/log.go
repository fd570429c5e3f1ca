package sharedsession

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Log keeps legacy sessions' event streams, so that a session's stream can
// be read on any replica: a log per stream of each session.
//
// A stream's events are numbered from 0 in the order appended; a log keeps
// a bounded number of the newest events of each stream, for a bounded
// time. Sessions are named by their [Key]. Implementations must be safe
// for concurrent use.
type Log interface {
	// Append adds the events data (one at least) at the end of stream of
	// the session keyed key, in order and at once, and returns the number
	// of the last. The stream's events expire after ttl without an Append.
	Append(ctx context.Context, key, stream string, ttl time.Duration, data ...[]byte) (last int, err error)
	// After returns the events of stream after number index, oldest first;
	// [ErrEventsDropped] when one of them is no longer kept.
	After(ctx context.Context, key, stream string, index int) ([][]byte, error)
	// Last returns the number of the newest event of stream; -1 for none.
	Last(ctx context.Context, key, stream string) (int, error)
	// Delete drops every stream of the session keyed key.
	Delete(ctx context.Context, key string) error
}

// ErrEventsDropped is the error of [Log.After] when an event asked for is
// no longer kept.
var ErrEventsDropped = errors.New("sharedsession: events of the stream were dropped")

// ErrNoEvents is the error of [Log.Append] given no event.
var ErrNoEvents = errors.New("sharedsession: appending no event")

// MemoryLog is a [Log] in process memory. It keeps at most max events per
// stream.
type MemoryLog struct {
	now func() time.Time
	max int

	mu      sync.Mutex
	streams map[[2]string]*memoryStream // by session key and stream
	sweepAt int                         // how many streams make Append drop the expired ones
}

type memoryStream struct {
	first   int      // the number of data[0]
	data    [][]byte // oldest first
	expires time.Time
}

// NewMemoryLog returns an empty log on the clock now (nil means
// [time.Now]) keeping keep events per stream (at least 1).
func NewMemoryLog(now func() time.Time, keep int) *MemoryLog {
	if now == nil {
		now = time.Now
	}
	return &MemoryLog{now: now, max: max(keep, 1), streams: map[[2]string]*memoryStream{}}
}

// stream returns the live stream of key, creating it when create.
func (m *MemoryLog) stream(key, stream string, create bool) *memoryStream {
	k := [2]string{key, stream}
	s := m.streams[k]
	if s != nil && !m.now().Before(s.expires) {
		delete(m.streams, k)
		s = nil
	}
	if s == nil && create {
		s = &memoryStream{}
		m.streams[k] = s
	}
	return s
}

// sweep drops the expired streams once there are twice as many streams
// as the last sweep left (and 64 at least): a stream nobody reads after
// it expired (every request's stream, once answered) would otherwise stay
// for ever, and the cost per Append stays constant on average.
func (m *MemoryLog) sweep() {
	if len(m.streams) < m.sweepAt {
		return
	}
	now := m.now()
	for k, s := range m.streams {
		if !now.Before(s.expires) {
			delete(m.streams, k)
		}
	}
	m.sweepAt = max(2*len(m.streams), 64)
}

// Append implements [Log].
func (m *MemoryLog) Append(_ context.Context, key, stream string, ttl time.Duration, data ...[]byte) (int, error) {
	if len(data) == 0 {
		return 0, ErrNoEvents
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep()
	s := m.stream(key, stream, true)
	s.expires = m.now().Add(ttl)
	for _, d := range data {
		s.data = append(s.data, append([]byte(nil), d...))
	}
	if over := len(s.data) - m.max; over > 0 {
		s.data = s.data[over:]
		s.first += over
	}
	return s.first + len(s.data) - 1, nil
}

// After implements [Log].
func (m *MemoryLog) After(_ context.Context, key, stream string, index int) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stream(key, stream, false)
	if s == nil {
		if index < 0 {
			return nil, nil
		}
		return nil, ErrEventsDropped
	}
	if index+1 < s.first {
		return nil, ErrEventsDropped
	}
	from := index + 1 - s.first
	if from >= len(s.data) {
		return nil, nil
	}
	out := make([][]byte, 0, len(s.data)-from)
	for _, d := range s.data[from:] {
		out = append(out, append([]byte(nil), d...))
	}
	return out, nil
}

// Last implements [Log].
func (m *MemoryLog) Last(_ context.Context, key, stream string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stream(key, stream, false)
	if s == nil {
		return -1, nil
	}
	return s.first + len(s.data) - 1, nil
}

// Delete implements [Log].
func (m *MemoryLog) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.streams {
		if k[0] == key {
			delete(m.streams, k)
		}
	}
	return nil
}
