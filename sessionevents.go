package portcullis

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/portcullis-mcp/portcullis/mcp"
)

// sessionEventsKept is how many of the newest events of one stream Redis
// keeps. A client resumes a stream within seconds of losing it, and what
// it missed is then at most the notifications and progress of those
// seconds, a few dozen; a thousand covers a burst far beyond that (a tool
// reporting progress per item of a long list) while bounding a stream's
// memory in Redis to a thousand messages whatever a session does.
const sessionEventsKept = 1000

// redisSessionEvents is the [mcp.SessionEvents] in Redis. Every key of
// one session starts with prefix "events:{" [mcp.SessionKey] "}:", so
// that on Cluster the session's keys share the hash slot its key names
// and one script can touch them all:
//
//   - "s:" stream: a list of the stream's kept events, oldest first,
//     expiring ttl after the stream's last Append;
//   - "streams": a hash with a field per stream, "first inc last idx":
//     the number of the list's first event, the stream's incarnation (a
//     random word drawn when the stream began, so that what coalesced in
//     an earlier stream of the same name, deleted or expired, does not
//     coalesce now), and the token and number of its last Append (so that
//     a retried Append adds nothing twice). It lives as long as the
//     longest-lived of the session's lists; as a stream begins, two
//     fields drawn at random are dropped if their lists have expired, so
//     that the hash does not keep every stream a long session had;
//   - "c:" sha256(data) ":" inc: present (PX coalesce) while an Append of
//     data to that incarnation coalesces.
//
// Messages between replicas go through one channel, prefix
// "session-events", with PUBLISH (broadcast to every node of a Cluster).
type redisSessionEvents struct {
	rdb    redis.UniversalClient
	prefix string
	keep   int // events kept per stream
}

// newRedisSessionEvents returns the session events in rdb under prefix,
// keeping [sessionEventsKept] events per stream.
func newRedisSessionEvents(rdb redis.UniversalClient, prefix string) *redisSessionEvents {
	return &redisSessionEvents{rdb: rdb, prefix: prefix, keep: sessionEventsKept}
}

// base is the start of every key of the session keyed key.
func (e *redisSessionEvents) base(key string) string {
	return e.prefix + "events:{" + key + "}:"
}

// channel is the Pub/Sub channel of every replica's messages.
func (e *redisSessionEvents) channel() string { return e.prefix + "session-events" }

// appendScript adds an event at the end of a stream, or nothing when the
// same data coalesces, and returns its number, or -1 when it coalesced.
// Every call, coalesced or not, restarts the stream's expiry, as
// [mcp.MemorySessionEvents] does. Run again with the same token (go-redis
// retries a command whose reply it lost) it returns the number the first
// run gave, unless another Append came between.
//
// KEYS: the stream's list, the session's streams hash.
// ARGV: the data, the stream, the token, the ttl and the coalescing window
// in ms (0: none), the events kept, the coalescing key of the data less
// its incarnation, the prefix of the session's lists.
var appendScript = redis.NewScript(`
local list, streams = KEYS[1], KEYS[2]
local data, stream, token = ARGV[1], ARGV[2], ARGV[3]
local ttl, coalesce, keep = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local first, inc, last, lastidx = 0, token, '', -1
local n = redis.call('LLEN', list)
if n > 0 then
  local v = redis.call('HGET', streams, stream)
  if v then
    local f, i, l, li = string.match(v, '^(%d+) (%x+) (%x*) (%-?%d+)$')
    first, inc, last, lastidx = tonumber(f), i, l, tonumber(li)
  end
  if last == token then return lastidx end
else
  -- A stream begins: drop the fields of two streams drawn at random if
  -- they have expired.
  for _, f in ipairs(redis.call('HRANDFIELD', streams, 2)) do
    if f ~= stream and redis.call('EXISTS', ARGV[8] .. f) == 0 then redis.call('HDEL', streams, f) end
  end
end
local function touch()
  redis.call('PEXPIRE', list, ttl)
  if ttl > 0 and redis.call('PTTL', streams) < ttl then redis.call('PEXPIRE', streams, ttl) end
end
if coalesce > 0 and not redis.call('SET', ARGV[7] .. inc, '1', 'PX', coalesce, 'NX') then
  touch()
  return -1
end
local len = redis.call('RPUSH', list, data)
if len > keep then
  redis.call('LTRIM', list, len - keep, -1)
  first = first + len - keep
  len = keep
end
local idx = first + len - 1
redis.call('HSET', streams, stream, string.format('%d %s %s %d', first, inc, token, idx))
touch()
return idx
`)

// afterScript returns the events of a stream after a number, oldest first,
// or -1 when one of them is no longer kept.
//
// KEYS: the stream's list, the session's streams hash.
// ARGV: the stream, the number.
var afterScript = redis.NewScript(`
local index = tonumber(ARGV[2])
local n = redis.call('LLEN', KEYS[1])
if n == 0 then
  if index < 0 then return {} end
  return -1
end
local first = 0
local v = redis.call('HGET', KEYS[2], ARGV[1])
if v then first = tonumber(string.match(v, '^%d+')) end
if index + 1 < first then return -1 end
local from = index + 1 - first
if from >= n then return {} end
return redis.call('LRANGE', KEYS[1], from, -1)
`)

// lastScript returns the number of the newest event of a stream, -1 for
// none.
//
// KEYS: the stream's list, the session's streams hash. ARGV: the stream.
var lastScript = redis.NewScript(`
local n = redis.call('LLEN', KEYS[1])
if n == 0 then return -1 end
local first = 0
local v = redis.call('HGET', KEYS[2], ARGV[1])
if v then first = tonumber(string.match(v, '^%d+')) end
return first + n - 1
`)

// deleteScript drops every stream of a session. Its coalescing keys stay
// until they expire, harmless: a stream begun later has another
// incarnation.
//
// KEYS: the session's streams hash. ARGV: the prefix of the session's
// lists.
var deleteScript = redis.NewScript(`
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do redis.call('DEL', ARGV[1] .. f) end
return redis.call('DEL', KEYS[1])
`)

// millis is d in whole milliseconds, rounded up, for PX and PEXPIRE.
func millis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// Append implements [mcp.SessionEvents].
func (e *redisSessionEvents) Append(ctx context.Context, key, stream string, data []byte, ttl, coalesce time.Duration) (int, bool, error) {
	return e.append(ctx, key, stream, data, ttl, coalesce, fmt.Sprintf("%016x", rand.Uint64()))
}

// append is Append with the token that makes a retry of it add nothing.
func (e *redisSessionEvents) append(ctx context.Context, key, stream string, data []byte, ttl, coalesce time.Duration, token string) (int, bool, error) {
	base := e.base(key)
	sum := sha256.Sum256(data)
	n, err := appendScript.Run(ctx, e.rdb, []string{base + "s:" + stream, base + "streams"},
		data, stream, token, millis(ttl), millis(coalesce), e.keep, base+"c:"+hex.EncodeToString(sum[:])+":", base+"s:").Int()
	if err != nil {
		return 0, false, fmt.Errorf("portcullis: appending a session event: %w", err)
	}
	if n < 0 {
		return 0, false, nil
	}
	return n, true, nil
}

// After implements [mcp.SessionEvents].
func (e *redisSessionEvents) After(ctx context.Context, key, stream string, index int) ([][]byte, error) {
	base := e.base(key)
	res, err := afterScript.Run(ctx, e.rdb, []string{base + "s:" + stream, base + "streams"}, stream, strconv.Itoa(index)).Result()
	if err != nil {
		return nil, fmt.Errorf("portcullis: reading session events: %w", err)
	}
	switch v := res.(type) {
	case int64:
		return nil, mcp.ErrEventsDropped
	case []any:
		if len(v) == 0 {
			return nil, nil
		}
		out := make([][]byte, 0, len(v))
		for _, d := range v {
			s, ok := d.(string)
			if !ok {
				return nil, fmt.Errorf("portcullis: reading session events: an event is a %T", d)
			}
			out = append(out, []byte(s))
		}
		return out, nil
	}
	return nil, fmt.Errorf("portcullis: reading session events: a reply of %T", res)
}

// Last implements [mcp.SessionEvents].
func (e *redisSessionEvents) Last(ctx context.Context, key, stream string) (int, error) {
	base := e.base(key)
	n, err := lastScript.Run(ctx, e.rdb, []string{base + "s:" + stream, base + "streams"}, stream).Int()
	if err != nil {
		return 0, fmt.Errorf("portcullis: reading the last session event: %w", err)
	}
	return n, nil
}

// Delete implements [mcp.SessionEvents].
func (e *redisSessionEvents) Delete(ctx context.Context, key string) error {
	base := e.base(key)
	if err := deleteScript.Run(ctx, e.rdb, []string{base + "streams"}, base+"s:").Err(); err != nil {
		return fmt.Errorf("portcullis: deleting session events: %w", err)
	}
	return nil
}

// Publish implements [mcp.SessionEvents]. On a Cluster it publishes on the
// primary of the channel's slot, where every listener subscribes: PUBLISH
// reaches every node's subscribers, but two messages sent to two nodes
// may arrive in either order. Should that primary not answer, it
// publishes on any node.
func (e *redisSessionEvents) Publish(ctx context.Context, msg []byte) error {
	if cc, ok := e.rdb.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, e.channel())
		if err == nil && node.Publish(ctx, e.channel(), msg).Err() == nil {
			return nil
		}
	}
	if err := e.rdb.Publish(ctx, e.channel(), msg).Err(); err != nil {
		return fmt.Errorf("portcullis: publishing a session message: %w", err)
	}
	return nil
}

// subscribeTimeout bounds waiting for Redis to confirm a subscription.
const subscribeTimeout = 10 * time.Second

// Listen implements [mcp.SessionEvents] with a subscription of its own,
// which go-redis renews after a lost connection or a failover; what is
// published while it is down is lost, as Redis Pub/Sub goes.
func (e *redisSessionEvents) Listen(ctx context.Context, deliver func([]byte)) error {
	ps := e.rdb.Subscribe(ctx, e.channel())
	// The first reply is the subscription's confirmation: from then on,
	// what anyone publishes reaches it.
	reply, err := ps.ReceiveTimeout(ctx, subscribeTimeout)
	if _, ok := reply.(*redis.Subscription); !ok && err == nil {
		err = fmt.Errorf("a reply of %T", reply)
	}
	if err != nil {
		ps.Close()
		return fmt.Errorf("portcullis: listening for session messages: %w", err)
	}
	ch := ps.Channel()
	go func() {
		defer ps.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-ch:
				if !ok || ctx.Err() != nil {
					return
				}
				deliver([]byte(m.Payload))
			}
		}
	}()
	return nil
}
