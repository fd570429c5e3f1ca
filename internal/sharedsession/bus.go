package sharedsession

import (
	"context"
	"slices"
	"sync"
)

// Bus carries messages between the replicas of a deployment: what one
// publishes, every subscription gets, its own included. Implementations
// must be safe for concurrent use.
type Bus interface {
	// Publish sends msg to every subscription.
	Publish(ctx context.Context, msg []byte) error
	// Subscribe calls deliver with each message published from the moment
	// it returns, in order, on one goroutine, until the subscription is
	// closed; ctx bounds subscribing only. When messages published since
	// it last delivered may have been lost (its connection to the bus was
	// lost and made again), it calls lost, on the same goroutine, before
	// it delivers anything published after.
	Subscribe(ctx context.Context, deliver func(msg []byte), lost func()) (Subscription, error)
}

// Subscription is a subscription to a [Bus].
type Subscription interface {
	// Close ends the subscription. Once it returns, deliver and lost are
	// not called again, and no goroutine of the subscription is left.
	Close() error
}

// MemoryBus is a [Bus] in process memory: a message is delivered to every
// subscription on the publishing goroutine, before Publish returns. None
// is lost, so lost is never called.
type MemoryBus struct {
	mu   sync.Mutex
	subs []*memorySubscription
}

// NewMemoryBus returns a bus without subscriptions.
func NewMemoryBus() *MemoryBus { return &MemoryBus{} }

type memorySubscription struct {
	bus     *MemoryBus
	deliver func([]byte)

	mu     sync.Mutex // held while delivering
	closed bool
}

// Publish implements [Bus].
func (b *MemoryBus) Publish(_ context.Context, msg []byte) error {
	b.mu.Lock()
	subs := slices.Clone(b.subs)
	b.mu.Unlock()
	for _, s := range subs {
		s.mu.Lock()
		if !s.closed {
			s.deliver(append([]byte(nil), msg...))
		}
		s.mu.Unlock()
	}
	return nil
}

// Subscribe implements [Bus].
func (b *MemoryBus) Subscribe(_ context.Context, deliver func([]byte), _ func()) (Subscription, error) {
	s := &memorySubscription{bus: b, deliver: deliver}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.subs = append(b.subs, s)
	return s, nil
}

// Close implements [Subscription]: it waits for a delivery in progress.
func (s *memorySubscription) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	b := s.bus
	b.mu.Lock()
	defer b.mu.Unlock()
	b.subs = slices.DeleteFunc(b.subs, func(o *memorySubscription) bool { return o == s })
	return nil
}
