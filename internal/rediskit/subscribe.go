package rediskit

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// fallbackSubscribeTimeout bounds waiting for a confirmation from a
// client whose timeouts [SubscribeTimeout] cannot read.
const fallbackSubscribeTimeout = 5 * time.Second

// SubscribeTimeout is how long [Client.Subscribe] waits for Redis to
// confirm a subscription: the client's dial timeout plus its read
// timeout, since a subscription dials a connection of its own and then
// waits for one reply.
func SubscribeTimeout(rdb redis.UniversalClient) time.Duration {
	switch r := rdb.(type) {
	case *redis.Client:
		return r.Options().DialTimeout + r.Options().ReadTimeout
	case *redis.ClusterClient:
		return r.Options().DialTimeout + r.Options().ReadTimeout
	}
	return fallbackSubscribeTimeout
}

// Subscribe subscribes to channels on a connection of its own and returns
// the subscription once Redis has confirmed it for every channel, so that
// everything published after Subscribe returns reaches it (until the
// connection drops: go-redis then subscribes again on a new connection,
// and what was published meanwhile is lost, as Redis Pub/Sub goes). It
// waits at most [SubscribeTimeout], or until ctx's deadline if sooner; an
// error is an [ErrUnavailable]. The caller closes the subscription.
func (c *Client) Subscribe(ctx context.Context, channels ...string) (*redis.PubSub, error) {
	ps := c.rdb.Subscribe(ctx)
	if err := ps.Subscribe(ctx, channels...); err != nil {
		_ = ps.Close()
		return nil, Unavailable("subscribe", err)
	}
	wait := SubscribeTimeout(c.rdb)
	if d, ok := ctx.Deadline(); ok {
		wait = max(min(wait, time.Until(d)), time.Millisecond)
	}
	deadline := time.Now().Add(wait)
	for range channels {
		reply, err := ps.ReceiveTimeout(ctx, max(time.Until(deadline), time.Millisecond))
		if _, ok := reply.(*redis.Subscription); !ok && err == nil {
			err = fmt.Errorf("a reply of %T before the confirmation", reply)
		}
		if err != nil {
			_ = ps.Close()
			return nil, Unavailable("subscribe", err)
		}
	}
	return ps, nil
}
