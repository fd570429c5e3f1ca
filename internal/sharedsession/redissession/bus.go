package redissession

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/portcullis-mcp/portcullis/internal/rediskit"
	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// Bus is the [sharedsession.Bus] in Redis: one Pub/Sub channel, prefix
// "session-events", with PUBLISH (broadcast to every node of a Cluster).
type Bus struct {
	kit     *rediskit.Client
	channel string
}

// NewBus returns the bus in kit's Redis under prefix.
func NewBus(kit *rediskit.Client, prefix string) *Bus {
	return &Bus{kit: kit, channel: prefix + "session-events"}
}

// Publish implements [sharedsession.Bus]. On a Cluster it publishes on the
// primary of the channel's slot, where every subscription is made:
// PUBLISH reaches every node's subscribers, but two messages sent to two
// nodes may arrive in either order. Should that primary not answer, it
// publishes on any node.
func (b *Bus) Publish(ctx context.Context, msg []byte) error {
	rdb := b.kit.Redis()
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, b.channel)
		if err == nil && node.Publish(ctx, b.channel, msg).Err() == nil {
			return nil
		}
	}
	if err := rdb.Publish(ctx, b.channel, msg).Err(); err != nil {
		return fmt.Errorf("redissession: %w", rediskit.Unavailable("publishing a session message", err))
	}
	return nil
}

// Subscribe implements [sharedsession.Bus] with a subscription of its
// own ([rediskit.Client.Subscribe]: it returns once Redis confirmed it),
// which go-redis renews after a lost connection or a failover; what is
// published while it is down is lost, as Redis Pub/Sub goes, and lost is
// called as the subscription is renewed.
func (b *Bus) Subscribe(ctx context.Context, deliver func([]byte), lost func()) (sharedsession.Subscription, error) {
	ps, err := b.kit.Subscribe(ctx, b.channel)
	if err != nil {
		return nil, fmt.Errorf("redissession: subscribing to session messages: %w", err)
	}
	s := &subscription{ps: ps, stop: make(chan struct{})}
	// Past the first, a confirmation is that of a subscription made again
	// on a new connection.
	ch := ps.ChannelWithSubscriptions()
	s.wg.Go(func() {
		for {
			select {
			case <-s.stop:
				return
			case m, ok := <-ch:
				if !ok {
					return
				}
				switch m := m.(type) {
				case *redis.Message:
					deliver([]byte(m.Payload))
				case *redis.Subscription:
					if m.Kind == "subscribe" {
						lost()
					}
				}
			}
		}
	})
	return s, nil
}

// subscription is a subscription of [Bus].
type subscription struct {
	ps   *redis.PubSub
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// Close implements [sharedsession.Subscription]: it waits for the
// delivering goroutine to end, then closes the subscription's
// connection.
func (s *subscription) Close() error {
	var err error
	s.once.Do(func() {
		close(s.stop)
		s.wg.Wait()
		err = s.ps.Close()
	})
	return err
}
