package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// sharedBus is this replica's end of the bus between replicas: it tells
// the others what happened to a session here, and hands what they say to
// this replica's copies and standalone streams. While its subscription is
// up without a gap, copies may be trusted (see [sessionCopies.trusts]).
type sharedBus struct {
	bus        sharedsession.Bus
	copies     *sessionCopies
	logger     *slog.Logger
	goroutines *goroutines // the shared sessions': answers handed, subscribing again

	mu      sync.Mutex
	ctx     context.Context // from start: answers are handed within it
	sub     sharedsession.Subscription
	closed  bool
	watches map[string]map[*watch]struct{} // by session key: the standalone streams open here
}

// The kinds of [busMessage].
const (
	busEvent         = "event"         // an event was appended to the session's standalone stream
	busAnswer        = "answer"        // Body holds a client's answers to server→client requests
	busSubscriptions = "subscriptions" // the session's subscriptions changed
	busRecord        = "record"        // the session's record changed otherwise (its log level)
	busEnded         = "ended"         // the session was deleted
)

// busMessage is what replicas tell each other of a session on the bus. It
// names the session by its [sharedsession.Key] only.
type busMessage struct {
	Kind string          `json:"kind"`
	Key  string          `json:"key"`
	Body json.RawMessage `json:"body,omitempty"`
}

// watch is a standalone stream open on this replica, woken by what the bus
// says of its session.
type watch struct {
	events chan struct{} // an event was appended
	subs   chan struct{} // the subscriptions changed
}

func newSharedBus(bus sharedsession.Bus, copies *sessionCopies, logger *slog.Logger, g *goroutines) *sharedBus {
	return &sharedBus{bus: bus, copies: copies, logger: logger, goroutines: g, ctx: context.Background(), watches: map[string]map[*watch]struct{}{}}
}

func (b *sharedBus) publish(ctx context.Context, m busMessage) error {
	msg, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return b.bus.Publish(ctx, msg)
}

// appended tells every replica that the standalone stream of the session
// keyed key has a new event.
func (b *sharedBus) appended(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.publish(ctx, busMessage{Kind: busEvent, Key: key}); err != nil {
		// The streams poll too: the event is late, not lost.
		b.logger.Warn("telling replicas of a session event", "error", err)
	}
}

// start subscribes to the bus, and keeps trying in the background while
// that fails (as when Redis is down at start), until ctx ends or close.
// Until it subscribes, streams still poll the log, and answers posted to
// other replicas do not reach this one's calls.
func (b *sharedBus) start(ctx context.Context) {
	b.mu.Lock()
	b.ctx = ctx
	b.mu.Unlock()
	if err := b.subscribe(ctx); err != nil {
		b.goroutines.goOn(func() { b.subscribeAgain(ctx, err) })
	}
}

// subscribe subscribes to the bus. Once it does, copies may be trusted; a
// gap in what it heard makes every copy read its record again.
func (b *sharedBus) subscribe(ctx context.Context) error {
	sub, err := b.bus.Subscribe(ctx, b.deliver, b.copies.listening)
	if err != nil {
		return err
	}
	b.mu.Lock()
	closed := b.closed
	if !closed {
		b.sub = sub
	}
	b.mu.Unlock()
	if closed {
		return sub.Close()
	}
	// What was said before it subscribed was not heard.
	b.copies.listening()
	return nil
}

// subscribeAgain subscribes after a first try failed with err, trying
// again with a growing delay (up to 30 s), until it succeeds or ctx ends.
func (b *sharedBus) subscribeAgain(ctx context.Context, err error) {
	delay := time.Second
	for ; err != nil; err = b.subscribe(ctx) {
		b.logger.Error("listening to the session bus; trying again", "error", err, "in", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, 30*time.Second)
	}
}

// close ends the subscription; once it returns, nothing is delivered.
func (b *sharedBus) close() error {
	b.mu.Lock()
	b.closed = true
	sub := b.sub
	b.sub = nil
	b.mu.Unlock()
	if sub == nil {
		return nil
	}
	return sub.Close()
}

// deliver hands a message of the bus to this replica's copies and streams.
func (b *sharedBus) deliver(msg []byte) {
	var m busMessage
	if json.Unmarshal(msg, &m) != nil {
		return
	}
	switch m.Kind {
	case busEvent:
		b.wake(m.Key, m.Kind)
	case busSubscriptions, busRecord:
		b.copies.changed()
		if _, c := b.copies.lookupKey(m.Key); c != nil {
			c.distrust(false)
		}
		if m.Kind == busSubscriptions {
			b.wake(m.Key, m.Kind)
		}
	case busAnswer:
		if _, c := b.copies.lookupKey(m.Key); c != nil {
			b.goroutines.goOn(func() { b.hand(c, m.Body) })
		}
	case busEnded:
		b.copies.changed()
		if _, c := b.copies.lookupKey(m.Key); c != nil {
			// Distrusted now; closed aside, since closing waits for the
			// calls in flight on the copy, and the bus does not.
			c.distrust(true)
			b.goroutines.goOn(c.close)
		}
	}
}

// hand hands body, a client's answers, to the copy c, as a POST of the
// client's would.
func (b *sharedBus) hand(c *sessionCopy, body []byte) {
	b.mu.Lock()
	ctx := b.ctx
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if code := c.inject(ctx, body); code != http.StatusAccepted {
		b.logger.Warn("handing an answer to a session", "status", code)
	}
}

// wake wakes this replica's streams of the session keyed key.
func (b *sharedBus) wake(key, kind string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for w := range b.watches[key] {
		c := w.events
		if kind == busSubscriptions {
			c = w.subs
		}
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// watch notes a standalone stream of the session keyed key open here.
func (b *sharedBus) watch(key string) *watch {
	w := &watch{events: make(chan struct{}, 1), subs: make(chan struct{}, 1)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.watches[key] == nil {
		b.watches[key] = map[*watch]struct{}{}
	}
	b.watches[key][w] = struct{}{}
	return w
}

// unwatch forgets a stream watch noted.
func (b *sharedBus) unwatch(key string, w *watch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.watches[key], w)
	if len(b.watches[key]) == 0 {
		delete(b.watches, key)
	}
}
