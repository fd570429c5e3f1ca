package mcp

import (
	"context"
	"crypto/sha256"
	"errors"
	"iter"
	"sync"
	"time"
)

// SessionEvents is what replicas share of legacy sessions' event streams,
// so that a session's stream can be read on any replica (see
// [Deps.Events]): a log per stream of each session, and a bus on which a
// replica tells the others that something happened to a session.
//
// A stream's events are numbered from 0 in the order appended; a log keeps
// a bounded number of the newest events of each stream, for a bounded
// time. Implementations key everything by [SessionKey], never by the raw
// session id, and must be safe for concurrent use.
type SessionEvents interface {
	// Append adds data at the end of stream of the session keyed key and
	// returns its number. The stream's events expire after ttl without an
	// Append. When coalesce is positive and the same data was appended to
	// the stream less than coalesce ago (by any replica), it adds nothing
	// and returns ok false.
	Append(ctx context.Context, key, stream string, data []byte, ttl, coalesce time.Duration) (index int, ok bool, err error)
	// After returns the events of stream after number index, oldest first;
	// [ErrEventsDropped] when one of them is no longer kept.
	After(ctx context.Context, key, stream string, index int) ([][]byte, error)
	// Last returns the number of the newest event of stream; -1 for none.
	Last(ctx context.Context, key, stream string) (int, error)
	// Delete drops every stream of the session keyed key.
	Delete(ctx context.Context, key string) error
	// Publish sends msg to every replica's Listen, this one's included.
	Publish(ctx context.Context, msg []byte) error
	// Listen calls deliver with each message published from now on, in
	// order, until ctx ends. It returns once it listens; deliver runs on
	// one goroutine of its own.
	Listen(ctx context.Context, deliver func(msg []byte)) error
}

// ErrEventsDropped is the error of [SessionEvents.After] when an event
// asked for is no longer kept.
var ErrEventsDropped = errors.New("mcp: events of the stream were dropped")

// MemorySessionEvents is a [SessionEvents] in process memory: for tests,
// and for replicas that share a process. It keeps at most max events per
// stream.
type MemorySessionEvents struct {
	now func() time.Time
	max int

	mu        sync.Mutex
	streams   map[[2]string]*memoryStream // by session key and stream
	sweepAt   int                         // how many streams make Append drop the expired ones
	listeners []func([]byte)
}

type memoryStream struct {
	first   int      // the number of data[0]
	data    [][]byte // oldest first
	expires time.Time
	recent  map[[32]byte]time.Time // data appended, by hash, until when it coalesces
}

// NewMemorySessionEvents returns an empty log on the clock now (nil means
// [time.Now]) keeping keep events per stream (at least 1).
func NewMemorySessionEvents(now func() time.Time, keep int) *MemorySessionEvents {
	if now == nil {
		now = time.Now
	}
	return &MemorySessionEvents{now: now, max: max(keep, 1), streams: map[[2]string]*memoryStream{}}
}

// stream returns the live stream of key, creating it when create.
func (m *MemorySessionEvents) stream(key, stream string, create bool) *memoryStream {
	k := [2]string{key, stream}
	s := m.streams[k]
	if s != nil && !m.now().Before(s.expires) {
		delete(m.streams, k)
		s = nil
	}
	if s == nil && create {
		s = &memoryStream{recent: map[[32]byte]time.Time{}}
		m.streams[k] = s
	}
	return s
}

// sweep drops the expired streams once there are twice as many streams
// as the last sweep left (and 64 at least): a stream nobody reads after
// it expired (every request's stream, once answered) would otherwise stay
// for ever, and the cost per Append stays constant on average.
func (m *MemorySessionEvents) sweep() {
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

// Append implements [SessionEvents].
func (m *MemorySessionEvents) Append(_ context.Context, key, stream string, data []byte, ttl, coalesce time.Duration) (int, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep()
	s := m.stream(key, stream, true)
	now := m.now()
	s.expires = now.Add(ttl)
	if coalesce > 0 {
		h := sha256.Sum256(data)
		if until, ok := s.recent[h]; ok && now.Before(until) {
			return 0, false, nil
		}
		for k, until := range s.recent {
			if !now.Before(until) {
				delete(s.recent, k)
			}
		}
		s.recent[h] = now.Add(coalesce)
	}
	s.data = append(s.data, append([]byte(nil), data...))
	if over := len(s.data) - m.max; over > 0 {
		s.data = s.data[over:]
		s.first += over
	}
	return s.first + len(s.data) - 1, true, nil
}

// After implements [SessionEvents].
func (m *MemorySessionEvents) After(_ context.Context, key, stream string, index int) ([][]byte, error) {
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

// Last implements [SessionEvents].
func (m *MemorySessionEvents) Last(_ context.Context, key, stream string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stream(key, stream, false)
	if s == nil {
		return -1, nil
	}
	return s.first + len(s.data) - 1, nil
}

// Delete implements [SessionEvents].
func (m *MemorySessionEvents) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.streams {
		if k[0] == key {
			delete(m.streams, k)
		}
	}
	return nil
}

// Publish implements [SessionEvents]: it calls every listener before it
// returns.
func (m *MemorySessionEvents) Publish(_ context.Context, msg []byte) error {
	m.mu.Lock()
	ls := append([]func([]byte){}, m.listeners...)
	m.mu.Unlock()
	for _, l := range ls {
		l(append([]byte(nil), msg...))
	}
	return nil
}

// Listen implements [SessionEvents]. Messages are delivered on the
// publishing goroutine.
func (m *MemorySessionEvents) Listen(ctx context.Context, deliver func([]byte)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var mu sync.Mutex
	done := false
	l := func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			deliver(b)
		}
	}
	m.listeners = append(m.listeners, l)
	i := len(m.listeners) - 1
	go func() {
		<-ctx.Done()
		mu.Lock()
		done = true
		mu.Unlock()
		m.mu.Lock()
		m.listeners[i] = func([]byte) {}
		m.mu.Unlock()
	}()
	return nil
}

// sharedEventStore is the SDK's [sdk.EventStore] over [SessionEvents]: the
// streams of every replica's copy of a session land in one log, so that
// Last-Event-ID replays on any replica.
type sharedEventStore struct {
	events   SessionEvents
	ttl      time.Duration
	replayed func(context.Context, int)
	appended func(key string)
}

// Open implements [sdk.EventStore]; a stream needs no opening.
func (*sharedEventStore) Open(context.Context, string, string) error { return nil }

// Append implements [sdk.EventStore].
func (e *sharedEventStore) Append(ctx context.Context, sessionID, streamID string, data []byte) error {
	// No coalescing: an identical list_changed may be a second change,
	// made on another replica, that the client must not miss.
	key := SessionKey(sessionID)
	_, ok, err := e.events.Append(ctx, key, streamID, data, e.ttl, 0)
	if err != nil {
		return err
	}
	if ok && streamID == "" {
		e.appended(key)
	}
	return nil
}

// After implements [sdk.EventStore].
func (e *sharedEventStore) After(ctx context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		evs, err := e.events.After(ctx, SessionKey(sessionID), streamID, index)
		if err != nil {
			yield(nil, err)
			return
		}
		if len(evs) > 0 {
			e.replayed(ctx, len(evs))
		}
		for _, d := range evs {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// SessionClosed implements [sdk.EventStore]. It keeps the streams: one
// replica's copy of a session ending is not the session ending; a DELETE
// drops them, and they expire.
func (*sharedEventStore) SessionClosed(context.Context, string) error { return nil }
