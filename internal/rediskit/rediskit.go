// Package rediskit is what the stores Portcullis keeps in Redis share
// (the task store of package tasks, the authorization server's state, the
// legacy session store and the shared rate limits): one error for "Redis
// did not answer", one way to name a key by a hash, expiring values whose
// writes a client is told of survive a failover, and a subscription
// confirmed before it is used. Each store keeps its own keys and scripts.
//
//	kit := rediskit.New(client, rediskit.Durability{Replicas: 1, Timeout: 500 * time.Millisecond})
//	sessions := kit.Values("portcullis:session:")
//	err := sessions.Set(ctx, rediskit.Hash(id), record, ttl)
//	if errors.Is(err, rediskit.ErrUnavailable) {
//		// 503: try again (Redis did not answer, or the write reached
//		// too few replicas to survive a failover)
//	}
//
// # Durability
//
// Redis replicates asynchronously: a primary answers a write before its
// replicas have it, so a failover can lose a write the client was told
// of. A [Client] with [Durability.Replicas] above zero follows each write
// of [Client.Write] (and so of [Values]) with WAIT on the same connection,
// which returns once that many replicas acknowledged the connection's
// writes or the timeout passed; too few is [ErrNotReplicated], which is an
// [ErrUnavailable]: the caller answers "try again" rather than telling the
// client of a write a failover may undo. A primary that lost its replicas
// (the old primary of a failover, until the sentinels make it a replica)
// has none to acknowledge, so what it takes is never counted as kept.
//
// On Redis Cluster the write and the WAIT go to the primary of the key's
// slot ([redis.ClusterClient.MasterForKey]); a store's keys that one
// write touches together share that slot.
package rediskit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrUnavailable is the error of every store when Redis did not answer (a
// refused or lost connection, a timeout, no primary known, a server
// error) or did not keep a write as asked ([ErrNotReplicated]): what was
// asked may well exist, so a caller answers "try again" (503), never "not
// found". After such an error a write may or may not have taken effect.
var ErrUnavailable = errors.New("redis unavailable")

// ErrNotReplicated is the error of a write that the primary took but
// fewer replicas than [Durability.Replicas] acknowledged within
// [Durability.Timeout]: a failover may lose it. errors.Is(err,
// ErrUnavailable) holds for it too.
var ErrNotReplicated = fmt.Errorf("%w: the write reached too few replicas", ErrUnavailable)

// Unavailable returns err, an error from Redis met during op (a word such
// as "create" or "get"), wrapped so that errors.Is(err, [ErrUnavailable])
// holds, naming op and the cause. nil stays nil, and an error that is
// already an ErrUnavailable is returned as it is.
func Unavailable(op string, err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}

// hashLen is how many bytes of the SHA-256 a [Hash] keeps: 128 bits, so
// that no two values a store names ever share a key.
const hashLen = 16

// Hash returns the part of a Redis key that stands for s: the first 32 hex
// digits of its SHA-256. Stores name by it whatever must not be readable
// in Redis (an owner's issuer and subject, a session id, a token's
// signature): keys show up in monitoring, slow logs and key scans.
func Hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:hashLen])
}

// Durability is how many replicas must have a write before it counts as
// done. The zero value waits for none.
type Durability struct {
	// Replicas is how many replicas must acknowledge each write; zero (or
	// less) means none: no WAIT is sent.
	Replicas int
	// Timeout is how long a write waits for them. It must be positive
	// when Replicas is; [New] makes it [DefaultTimeout] otherwise.
	Timeout time.Duration
}

// DefaultTimeout is the [Durability.Timeout] of a Durability that asks
// for replicas and names no timeout.
const DefaultTimeout = 500 * time.Millisecond

// Client is the Redis the stores share and how their writes wait for
// replicas. Create it with [New]; it is safe for concurrent use.
type Client struct {
	rdb redis.UniversalClient
	d   Durability
}

// New returns a Client on rdb (a *redis.Client for one server or
// Sentinel, a *redis.ClusterClient for Cluster) whose writes wait as d
// says. rdb belongs to the caller, who closes it.
func New(rdb redis.UniversalClient, d Durability) *Client {
	if d.Replicas < 0 {
		d.Replicas = 0
	}
	if d.Replicas > 0 && d.Timeout <= 0 {
		d.Timeout = DefaultTimeout
	}
	return &Client{rdb: rdb, d: d}
}

// Redis returns the go-redis client, for a store's reads, its scripts
// that need no durability, and its transactions.
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

// Durability returns how the client's writes wait for replicas.
func (c *Client) Durability() Durability { return c.d }

// Write runs fn, which writes key (and, on Cluster, only keys of its
// slot), and returns once the replicas [Durability] asks for acknowledged
// fn's writes. With replicas to wait for, fn gets one connection to the
// primary that holds key, and WAIT follows on it; without, fn gets the
// client itself, and go-redis retries each command as it does for any.
// fn's own error is returned as it is; an error of the WAIT, or too few
// replicas, is an [ErrUnavailable] ([ErrNotReplicated] for too few).
//
// fn's commands should be safe to run twice (a SET, a script that
// recognises its own earlier run): after a lost reply the caller cannot
// tell whether they ran.
func (c *Client) Write(ctx context.Context, key string, fn func(redis.Cmdable) error) error {
	return c.WriteUndo(ctx, key, fn, nil)
}

// WriteUndo is [Client.Write] with undo, which runs on the same
// connection when the write reached too few replicas, to take back on the
// primary what the replicas do not hold, so that a client's retry meets
// the state a failover would leave. Undo is best effort (its error is not
// returned), and should change only what fn wrote (compare before it
// deletes or restores). Nil undo is Write.
func (c *Client) WriteUndo(ctx context.Context, key string, fn, undo func(redis.Cmdable) error) error {
	if c.d.Replicas <= 0 {
		return fn(c.rdb)
	}
	conn, err := c.primaryConn(ctx, key)
	if err != nil {
		return Unavailable("write", err)
	}
	defer conn.Close()
	if err := fn(conn); err != nil {
		if isMoved(err) {
			c.reload(ctx)
		}
		return err
	}
	err = c.Replicated(ctx, conn)
	if errors.Is(err, ErrNotReplicated) && undo != nil {
		_ = undo(conn)
	}
	return err
}

// Waiter is a connection that can wait for its writes to reach replicas:
// a transaction's *redis.Tx, or a *redis.Conn.
type Waiter interface {
	Wait(ctx context.Context, replicas int, timeout time.Duration) *redis.IntCmd
}

// Replicated waits on conn, the connection that just wrote (a
// transaction's *redis.Tx), until the replicas [Durability] asks for
// acknowledged its writes: nil, or an [ErrUnavailable] ([ErrNotReplicated]
// for too few). With no replicas to wait for it returns nil at once.
func (c *Client) Replicated(ctx context.Context, conn Waiter) error {
	if c.d.Replicas <= 0 {
		return nil
	}
	n, err := conn.Wait(ctx, c.d.Replicas, c.d.Timeout).Result()
	if err != nil {
		return Unavailable("wait for replicas", err)
	}
	return replicated(n, c.d)
}

// replicated judges WAIT's answer: n replicas acknowledged.
func replicated(n int64, d Durability) error {
	if n < int64(d.Replicas) {
		return fmt.Errorf("%w: %d of %d within %v", ErrNotReplicated, n, d.Replicas, d.Timeout)
	}
	return nil
}

// primaryConn returns one connection to the primary that holds key. The
// caller closes it, which gives it back to the pool.
func (c *Client) primaryConn(ctx context.Context, key string) (*redis.Conn, error) {
	switch r := c.rdb.(type) {
	case *redis.Client:
		return r.Conn(), nil
	case *redis.ClusterClient:
		node, err := r.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return node.Conn(), nil
	}
	return nil, fmt.Errorf("rediskit: waiting for replicas needs a *redis.Client or a *redis.ClusterClient, not a %T", c.rdb)
}

// isMoved reports whether err says that the key's slot is served by
// another node (a resharding or a failover the client has not learned).
func isMoved(err error) bool {
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	return moved || ask
}

// reload makes a cluster client read the slots again, after a write on
// the node it named met a moved slot.
func (c *Client) reload(ctx context.Context) {
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx)
	}
}

// RunScript runs script, which writes keys (on Cluster, keys of one
// slot), through [Client.Write]: EVALSHA, and EVAL when Redis does not
// know the script yet. The script's reply is in the returned command (a
// nil reply is its redis.Nil error); an error of Redis or of the script
// is an [ErrUnavailable] naming op.
func (c *Client) RunScript(ctx context.Context, op string, script *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	var cmd *redis.Cmd
	key := ""
	if len(keys) > 0 {
		key = keys[0]
	}
	err := c.Write(ctx, key, func(w redis.Cmdable) error {
		cmd = script.Run(ctx, w, keys, args...)
		if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		return nil // a nil reply is an answer: wait for what the script wrote
	})
	if err != nil {
		return cmd, Unavailable(op, err)
	}
	return cmd, nil
}
