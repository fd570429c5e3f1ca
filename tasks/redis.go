package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/rediskit"
	"github.com/redis/go-redis/v9"
)

// ErrUnavailable wraps every error of a [RedisStore] that comes from
// reaching Redis (a refused or lost connection, a timeout, a server
// error, a write that reached fewer replicas than [WaitForReplicas]
// asks): the task may well exist, so a caller must not answer "not
// found" but "try again". errors.Is(err, ErrUnavailable) tells it apart
// from [ErrNotFound], which a RedisStore returns only when Redis answered
// that the task is not there. After a timeout, a write (Create, Update)
// may or may not have taken effect: Redis may have run it without its
// reply arriving. It is the one error of every store Portcullis keeps in
// Redis (internal/rediskit).
var ErrUnavailable = rediskit.ErrUnavailable

// maxUpdateAttempts bounds how often [RedisStore.Update] retries when
// another writer changes the task between its read and its write. Each
// round of conflicting writers lets at least one through, so this many
// concurrent writers on one task always succeed.
const maxUpdateAttempts = 64

// RedisStore keeps tasks in Redis, so that every replica sees every task
// and a result outlives the replica that produced it. Create it with
// [NewRedisStore].
//
// Under the store's prefix it keeps:
//
//   - task:ID, the task as JSON, expiring (PEXPIREAT) at its Expires;
//   - live, a sorted set of the live tasks' IDs scored by their lease
//     (Unix milliseconds), so that [RedisStore.Stale] is one range query
//     and the total cap one count;
//   - owner:HASH, the set of one owner's live tasks, HASH being
//     rediskit.Hash of the owner (never the owner itself);
//   - the Pub/Sub channel "changed", carrying the ID of each task written.
//
// A live task whose key expired (Redis forgot it) leaves its ID in the
// sets; Create drops such IDs when a cap would refuse, and Stale whenever
// it meets them, so that they never count for long.
//
// Expiry is absolute (the replica's Expires, applied by Redis's clock),
// as are leases (one replica's lease, judged by another's clock in
// Stale): the replicas' and Redis's clocks must agree (NTP) to well
// within a lease.
//
// With [WaitForReplicas], Create and Update return once the replicas
// hold the task, so that a failover does not lose a task a client was
// told of; a Create that reached too few is taken back.
//
// It needs Redis 7.0 or later (SET … PXAT, PEXPIREAT … GT). On Redis
// Cluster every key must be in one slot: give a prefix with a hash tag,
// such as "{portcullis}:".
type RedisStore struct {
	client  redis.UniversalClient
	kit     *rediskit.Client
	prefix  string
	now     func() time.Time
	live    string // the live sorted set's key
	channel string // the Pub/Sub channel

	closeOnce sync.Once
	closed    chan struct{}
}

// NewRedisStore returns a store that keeps its tasks in client, every key
// starting with prefix (such as "portcullis:"; empty means none). now nil
// means time.Now; the store treats a task as gone once now reaches its
// Expires, even if Redis has not yet removed it, so that a test's clock
// and Redis agree.
//
// The client belongs to the caller (it may be shared with other users,
// such as the rate limits): [RedisStore.Close] does not close it. Its read
// timeout bounds how long each method waits when Redis stops answering.
func NewRedisStore(client redis.UniversalClient, prefix string, now func() time.Time, opts ...RedisOption) *RedisStore {
	if now == nil {
		now = time.Now
	}
	var o redisOptions
	for _, opt := range opts {
		opt(&o)
	}
	return &RedisStore{
		client:  client,
		kit:     rediskit.New(client, rediskit.Durability{Replicas: o.replicas, Timeout: o.timeout}),
		prefix:  prefix,
		now:     now,
		live:    prefix + "live",
		channel: prefix + "changed",
		closed:  make(chan struct{}),
	}
}

// RedisOption tunes a [RedisStore].
type RedisOption func(*redisOptions)

type redisOptions struct {
	replicas int
	timeout  time.Duration
}

// WaitForReplicas makes Create and Update return only once replicas of
// the Redis primary acknowledged the write (Redis's WAIT, on the
// connection that wrote), waiting at most timeout (zero: half a second);
// too few is an [ErrUnavailable], and a Create is then taken back. Zero
// replicas (the default) does not wait.
func WaitForReplicas(replicas int, timeout time.Duration) RedisOption {
	return func(o *redisOptions) { o.replicas, o.timeout = replicas, timeout }
}

func (s *RedisStore) taskKey(id string) string { return s.prefix + "task:" + id }

// ownerKey is the key of owner's set of live tasks. The owner (issuer and
// subject) is hashed: Redis keys show up in monitoring and slow logs.
func (s *RedisStore) ownerKey(owner string) string {
	return s.prefix + "owner:" + rediskit.Hash(owner)
}

// unavailable wraps an error from Redis.
func unavailable(op string, err error) error {
	return rediskit.Unavailable("task "+op, err)
}

// createScript saves a new task and counts it against the caps, as one
// atomic step. It returns "ok", "exists", "owner_cap" or "total_cap".
// Before refusing for a cap it drops the IDs of tasks Redis has expired
// from the set, and counts again. Run twice with the same task (go-redis
// retries a command whose reply timed out) it answers "ok" both times.
//
// KEYS: the task key, the live set, the owner's set.
// ARGV: the task JSON, Expires and Lease in Unix ms, "1" if the task is
// live, the ID, the per-owner cap, the total cap, the task key prefix.
var createScript = redis.NewScript(`
local function prune_set(key, taskprefix)
  for _, id in ipairs(redis.call('SMEMBERS', key)) do
    if redis.call('EXISTS', taskprefix .. id) == 0 then redis.call('SREM', key, id) end
  end
  return redis.call('SCARD', key)
end
local function prune_zset(key, taskprefix)
  for _, id in ipairs(redis.call('ZRANGE', key, 0, -1)) do
    if redis.call('EXISTS', taskprefix .. id) == 0 then redis.call('ZREM', key, id) end
  end
  return redis.call('ZCARD', key)
end
-- extend makes key live at least until at: a set must outlive its tasks,
-- and goes away once all of them have.
local function extend(key, at)
  if redis.call('PTTL', key) == -1 then
    redis.call('PEXPIREAT', key, at)
  else
    redis.call('PEXPIREAT', key, at, 'GT')
  end
end

local current = redis.call('GET', KEYS[1])
if current then
  -- The same task again is a client's retry of a create whose reply was
  -- lost: it succeeded.
  if current == ARGV[1] then return 'ok' end
  return 'exists'
end
local live = ARGV[4] == '1'
if live then
  local per_owner, total = tonumber(ARGV[6]), tonumber(ARGV[7])
  if per_owner > 0 and redis.call('SCARD', KEYS[3]) >= per_owner and prune_set(KEYS[3], ARGV[8]) >= per_owner then
    return 'owner_cap'
  end
  if total > 0 and redis.call('ZCARD', KEYS[2]) >= total and prune_zset(KEYS[2], ARGV[8]) >= total then
    return 'total_cap'
  end
end
if not redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[2], 'NX') then return 'exists' end
if live then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[5])
  redis.call('SADD', KEYS[3], ARGV[5])
  extend(KEYS[2], ARGV[2])
  extend(KEYS[3], ARGV[2])
end
return 'ok'
`)

// staleScript returns the IDs in the live set scored below ARGV[1] whose
// task still exists, and drops those whose task Redis has expired.
//
// KEYS: the live set. ARGV: now in Unix ms, the task key prefix.
var staleScript = redis.NewScript(`
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])) do
  if redis.call('EXISTS', ARGV[2] .. id) == 1 then
    out[#out + 1] = id
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
`)

// uncreateScript takes back a task Create saved that reached too few
// replicas: the task key if it still holds what Create wrote, and its ID
// in the live sets.
//
// KEYS: the task key, the live set, the owner's set. ARGV: the task
// JSON, the ID.
var uncreateScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('SREM', KEYS[3], ARGV[2])
return 1
`)

// Create implements [Store].
func (s *RedisStore) Create(ctx context.Context, t *Task, caps Caps) error {
	if t.ID == "" {
		return errors.New("tasks: a task needs an id")
	}
	if !s.now().Before(t.Expires) {
		return fmt.Errorf("tasks: task %s expires at %v, which has passed", t.ID, t.Expires)
	}
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("tasks: encoding task %s: %w", t.ID, err)
	}
	live := "0"
	if !t.Status.Terminal() {
		live = "1"
	}
	keys := []string{s.taskKey(t.ID), s.live, s.ownerKey(t.Owner)}
	var res string
	err = s.kit.WriteUndo(ctx, keys[0], func(w redis.Cmdable) error {
		var err error
		res, err = createScript.Run(ctx, w, keys,
			data, t.Expires.UnixMilli(), t.Lease.UnixMilli(), live, t.ID,
			max(caps.PerOwner, 0), max(caps.Total, 0), s.prefix+"task:",
		).Text()
		return err
	}, func(w redis.Cmdable) error {
		if res != "ok" {
			return nil
		}
		return uncreateScript.Run(ctx, w, keys, data, t.ID).Err()
	})
	if err != nil {
		return unavailable("create", err)
	}
	switch res {
	case "ok":
		return nil
	case "exists":
		return errors.New("tasks: task id already in use")
	case "owner_cap":
		return ErrOwnerCap
	case "total_cap":
		return ErrTotalCap
	}
	return fmt.Errorf("tasks: unexpected answer %q from the create script", res)
}

// read returns the task stored under id, by c (the client, or a
// transaction).
func (s *RedisStore) read(ctx context.Context, c redis.Cmdable, id string) (*Task, error) {
	data, err := c.Get(ctx, s.taskKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, unavailable("get", err)
	}
	t := new(Task)
	if err := json.Unmarshal(data, t); err != nil {
		return nil, fmt.Errorf("tasks: task %s in Redis is not valid JSON (was it written by another program under the same key prefix?): %w", id, err)
	}
	if !s.now().Before(t.Expires) {
		return nil, ErrNotFound
	}
	return t, nil
}

// Get implements [Store].
func (s *RedisStore) Get(ctx context.Context, id string) (*Task, error) {
	return s.read(ctx, s.client, id)
}

// fnError carries an error of the caller's update function out of the
// transaction, unwrapped by Update.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// Update implements [Store] with optimistic locking: it WATCHes the task's
// key, reads the task, calls fn and writes the result in a MULTI/EXEC
// that fails if anyone wrote the key in between; then it reads and calls
// fn again, up to a bound. The write, the live sets and the announcement
// on the channel are one transaction.
func (s *RedisStore) Update(ctx context.Context, id string, fn func(*Task) error) (*Task, error) {
	key := s.taskKey(id)
	for attempt := range maxUpdateAttempts {
		var out *Task
		err := s.client.Watch(ctx, func(tx *redis.Tx) error {
			old, err := s.read(ctx, tx, id)
			if err != nil {
				return err
			}
			c := old.Clone()
			if err := fn(c); err != nil {
				if errors.Is(err, ErrUnchanged) {
					out = old
					return nil
				}
				return fnError{err}
			}
			c.ID, c.Owner = old.ID, old.Owner
			data, err := json.Marshal(c)
			if err != nil {
				return fnError{fmt.Errorf("tasks: encoding task %s: %w", id, err)}
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, key, data, redis.KeepTTL)
				if !c.Expires.Equal(old.Expires) {
					p.PExpireAt(ctx, key, c.Expires)
				}
				if c.Status.Terminal() {
					p.ZRem(ctx, s.live, id)
					p.SRem(ctx, s.ownerKey(c.Owner), id)
				} else {
					if !c.Lease.Equal(old.Lease) {
						// XX: never put back a task that was not live.
						p.ZAddXX(ctx, s.live, redis.Z{Score: float64(c.Lease.UnixMilli()), Member: id})
					}
					if c.Expires.After(old.Expires) {
						at := c.Expires.UnixMilli()
						p.Do(ctx, "PEXPIREAT", s.live, at, "GT")
						p.Do(ctx, "PEXPIREAT", s.ownerKey(c.Owner), at, "GT")
					}
				}
				p.Publish(ctx, s.channel, id)
				return nil
			})
			if err != nil {
				return err
			}
			if err := s.kit.Replicated(ctx, tx); err != nil {
				return err
			}
			out = c
			return nil
		}, key)
		var fe fnError
		switch {
		case err == nil:
			return out.Clone(), nil
		case errors.As(err, &fe):
			return nil, fe.err
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrUnavailable):
			return nil, err
		case errors.Is(err, redis.TxFailedErr):
			if err := backoff(ctx, attempt); err != nil {
				return nil, unavailable("update", err)
			}
			continue
		default:
			return nil, unavailable("update", err)
		}
	}
	return nil, fmt.Errorf("tasks: task %s changed under %d updates in a row; too many writers on one task, try again", id, maxUpdateAttempts)
}

// backoff waits a little before an update's next attempt: a random time
// up to a millisecond per attempt so far (at most 16), so that writers
// that collided spread out.
func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(rand.Int64N(int64(min(attempt+1, 16)) * int64(time.Millisecond)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Stale implements [Store]. It also forgets the IDs of live tasks that
// Redis has expired.
func (s *RedisStore) Stale(ctx context.Context, now time.Time) ([]string, error) {
	ids, err := staleScript.Run(ctx, s.client, []string{s.live}, now.UnixMilli(), s.prefix+"task:").StringSlice()
	if err != nil {
		return nil, unavailable("stale", err)
	}
	return ids, nil
}

// Subscribe implements [Store] with Redis Pub/Sub. It returns once Redis
// has confirmed the subscription, so every change written after it
// returns is heard (unless the connection drops). The subscription uses a
// connection of its own; go-redis reconnects and resubscribes after Redis
// comes back. It ends when ctx is done or the store is closed; the
// channel is not closed (select on ctx as well), as with
// [MemoryStore.Subscribe]. A reader slower than the changes misses some.
func (s *RedisStore) Subscribe(ctx context.Context) (<-chan string, error) {
	select {
	case <-s.closed:
		return nil, errors.New("tasks: Subscribe on a closed store")
	default:
	}
	ps, err := s.kit.Subscribe(ctx, s.channel)
	if err != nil {
		return nil, unavailable("subscribe", err)
	}
	msgs := ps.Channel(redis.WithChannelSize(64))
	out := make(chan string, 64)
	go func() {
		defer ps.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.closed:
				return
			case m, ok := <-msgs:
				if !ok {
					return
				}
				select {
				case out <- m.Payload:
				default: // a slow reader polls
				}
			}
		}
	}()
	return out, nil
}

// Ping implements [Store].
func (s *RedisStore) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// Close implements [Store]: it ends the store's subscriptions and their
// connections. It does not close the client, which belongs to the caller.
func (s *RedisStore) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return nil
}

var _ Store = (*RedisStore)(nil)
