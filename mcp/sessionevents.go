package mcp

import (
	"context"
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
	// Publish sends msg to every replica's Listen, this one's included.
	Publish(ctx context.Context, msg []byte) error
	// Listen calls deliver with each message published from now on, in
	// order, until ctx ends. It returns once it listens; deliver runs on
	// one goroutine of its own. When messages published since it last
	// delivered may have been lost (its connection to the bus was lost and
	// made again), it calls lost, on the same goroutine, before it
	// delivers anything published after.
	Listen(ctx context.Context, deliver func(msg []byte), lost func()) error
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
		s = &memoryStream{}
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
func (m *MemorySessionEvents) Append(_ context.Context, key, stream string, ttl time.Duration, data ...[]byte) (int, error) {
	if len(data) == 0 {
		return 0, errors.New("mcp: appending no session event")
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
// publishing goroutine; none is lost, so lost is never called.
func (m *MemorySessionEvents) Listen(ctx context.Context, deliver func([]byte), lost func()) error {
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
//
// A request's stream costs the log one Append per event, its priming event
// included: the SDK appends that empty event as the stream opens, and it
// waits here to be written with the stream's first real event (a call's
// response, or a notification before it), in the same Append. Until then
// the stream's log is empty, and After from the priming event finds
// nothing yet (see After). One replica writes a request's stream: the one
// serving its POST. (The SDK writes a priming event only when its HTTP
// handler put the request's protocol version in the context; a copy's
// transport is served directly, so on this path it writes none today, and
// a call costs the log its response's Append.)
type sharedEventStore struct {
	events   SessionEvents
	ttl      time.Duration
	replayed func(context.Context, int)
	appended func(key string)
	closed   func(sessionID string) // a copy's session ended

	mu     sync.Mutex
	primed map[[2]string]bool // by session id and stream: the request streams whose priming event waits
}

// Open implements [sdk.EventStore]; a stream needs no opening.
func (*sharedEventStore) Open(context.Context, string, string) error { return nil }

// Append implements [sdk.EventStore].
func (e *sharedEventStore) Append(ctx context.Context, sessionID, streamID string, data []byte) error {
	evs := [][]byte{data}
	if streamID != "" {
		k := [2]string{sessionID, streamID}
		e.mu.Lock()
		switch {
		case len(data) == 0:
			e.primed[k] = true
			e.mu.Unlock()
			return nil // written with the stream's first event
		case e.primed[k]:
			delete(e.primed, k)
			evs = [][]byte{nil, data}
		}
		e.mu.Unlock()
	}
	// No coalescing: an identical list_changed may be a second change,
	// made on another replica, that the client must not miss.
	key := SessionKey(sessionID)
	if _, err := e.events.Append(ctx, key, streamID, e.ttl, evs...); err != nil {
		return err
	}
	if streamID == "" {
		e.appended(key)
	}
	return nil
}

// After implements [sdk.EventStore]. A request's stream resumed from its
// priming event (index 0) before its first event was written has an empty
// log: nothing to replay yet, and the client asks again, as when the log
// holds the priming event alone.
func (e *sharedEventStore) After(ctx context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		key := SessionKey(sessionID)
		evs, err := e.events.After(ctx, key, streamID, index)
		if errors.Is(err, ErrEventsDropped) && streamID != "" && index == 0 {
			if n, lerr := e.events.Last(ctx, key, streamID); lerr == nil && n < 0 {
				evs, err = nil, nil
			}
		}
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
// drops them, and they expire. It forgets the priming events of the
// copy's requests left unanswered, and tells the replica that the copy
// ended.
func (e *sharedEventStore) SessionClosed(_ context.Context, sessionID string) error {
	e.mu.Lock()
	for k := range e.primed {
		if k[0] == sessionID {
			delete(e.primed, k)
		}
	}
	e.mu.Unlock()
	if e.closed != nil {
		e.closed(sessionID)
	}
	return nil
}
