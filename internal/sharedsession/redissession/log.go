package redissession

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/portcullis-mcp/portcullis/internal/rediskit"
	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// keptPerStream is how many of the newest events of one stream Redis
// keeps. A client resumes a stream within seconds of losing it, and what
// it missed is then at most the notifications and progress of those
// seconds, a few dozen; a thousand covers a burst far beyond that (a tool
// reporting progress per item of a long list) while bounding a stream's
// memory in Redis to a thousand messages whatever a session does.
const keptPerStream = 1000

// Log is the [sharedsession.Log] in Redis. Every key of one session
// starts with prefix "events:{" and the session's key "}:", so that on
// Cluster the session's keys share the hash slot its key names and one
// script can touch them all:
//
//   - "s:" stream: a list of the stream's kept events, oldest first,
//     expiring ttl after the stream's last Append;
//   - "streams": a hash with a field per stream, "first token idx": the
//     number of the list's first event, and the token and number of its
//     last Append (so that a retried Append adds nothing twice). It lives
//     as long as the longest-lived of the session's lists, and names every
//     stream for Delete; as a stream begins, two fields drawn at random
//     are dropped if their lists have expired, so that the hash does not
//     keep every stream a long session had.
type Log struct {
	rdb    redis.UniversalClient
	prefix string
	keep   int // events kept per stream
}

// NewLog returns the log in kit's Redis under prefix, keeping
// [keptPerStream] events per stream. Its writes do not wait for
// replicas: what a failover loses of a stream is what Redis Pub/Sub
// loses of the bus, notifications a client re-reads the state after.
func NewLog(kit *rediskit.Client, prefix string) *Log {
	return &Log{rdb: kit.Redis(), prefix: prefix, keep: keptPerStream}
}

// base is the start of every key of the session keyed key.
func (e *Log) base(key string) string {
	return e.prefix + "events:{" + key + "}:"
}

// appendScript adds events at the end of a stream and returns the number
// of the last, in one round trip: a request's stream, whose priming event
// and response come in one Append, costs a call one. Every call restarts
// the stream's expiry, as [sharedsession.MemoryLog] does. Run again with
// the same token (go-redis retries a command whose reply it lost) it
// returns the number the first run gave, unless another Append came
// between.
//
// KEYS: the stream's list, the session's streams hash.
// ARGV: the stream, the token, the ttl in ms, the events kept, the prefix
// of the session's lists, then the events.
var appendScript = redis.NewScript(`
local list, streams = KEYS[1], KEYS[2]
local stream, token = ARGV[1], ARGV[2]
local ttl, keep = tonumber(ARGV[3]), tonumber(ARGV[4])
local first = 0
if redis.call('LLEN', list) > 0 then
  local v = redis.call('HGET', streams, stream)
  if v then
    local f, last, lastidx = string.match(v, '^(%d+) (%x*) (%-?%d+)$')
    if f then
      if last == token then return tonumber(lastidx) end
      first = tonumber(f)
    end
  end
else
  -- A stream begins: drop the fields of two streams drawn at random if
  -- they have expired.
  for _, f in ipairs(redis.call('HRANDFIELD', streams, 2)) do
    if f ~= stream and redis.call('EXISTS', ARGV[5] .. f) == 0 then redis.call('HDEL', streams, f) end
  end
end
local len = redis.call('RPUSH', list, unpack(ARGV, 6))
if len > keep then
  redis.call('LTRIM', list, len - keep, -1)
  first = first + len - keep
  len = keep
end
local idx = first + len - 1
redis.call('HSET', streams, stream, string.format('%d %s %d', first, token, idx))
redis.call('PEXPIRE', list, ttl)
if ttl > 0 and redis.call('PTTL', streams) < ttl then redis.call('PEXPIRE', streams, ttl) end
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

// deleteScript drops every stream of a session.
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

// Append implements [sharedsession.Log].
func (e *Log) Append(ctx context.Context, key, stream string, ttl time.Duration, data ...[]byte) (int, error) {
	return e.append(ctx, key, stream, ttl, fmt.Sprintf("%016x", rand.Uint64()), data)
}

// append is Append with the token that makes a retry of it add nothing.
func (e *Log) append(ctx context.Context, key, stream string, ttl time.Duration, token string, data [][]byte) (int, error) {
	if len(data) == 0 {
		return 0, sharedsession.ErrNoEvents
	}
	base := e.base(key)
	args := make([]any, 0, 5+len(data))
	args = append(args, stream, token, millis(ttl), e.keep, base+"s:")
	for _, d := range data {
		args = append(args, d)
	}
	n, err := appendScript.Run(ctx, e.rdb, []string{base + "s:" + stream, base + "streams"}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("redissession: %w", rediskit.Unavailable("appending a session event", err))
	}
	return n, nil
}

// After implements [sharedsession.Log].
func (e *Log) After(ctx context.Context, key, stream string, index int) ([][]byte, error) {
	base := e.base(key)
	res, err := afterScript.Run(ctx, e.rdb, []string{base + "s:" + stream, base + "streams"}, stream, strconv.Itoa(index)).Result()
	if err != nil {
		return nil, fmt.Errorf("redissession: %w", rediskit.Unavailable("reading session events", err))
	}
	switch v := res.(type) {
	case int64:
		return nil, sharedsession.ErrEventsDropped
	case []any:
		if len(v) == 0 {
			return nil, nil
		}
		out := make([][]byte, 0, len(v))
		for _, d := range v {
			s, ok := d.(string)
			if !ok {
				return nil, fmt.Errorf("redissession: reading session events: an event is a %T", d)
			}
			out = append(out, []byte(s))
		}
		return out, nil
	}
	return nil, fmt.Errorf("redissession: reading session events: a reply of %T", res)
}

// Last implements [sharedsession.Log].
func (e *Log) Last(ctx context.Context, key, stream string) (int, error) {
	base := e.base(key)
	n, err := lastScript.Run(ctx, e.rdb, []string{base + "s:" + stream, base + "streams"}, stream).Int()
	if err != nil {
		return 0, fmt.Errorf("redissession: %w", rediskit.Unavailable("reading the last session event", err))
	}
	return n, nil
}

// Delete implements [sharedsession.Log].
func (e *Log) Delete(ctx context.Context, key string) error {
	base := e.base(key)
	if err := deleteScript.Run(ctx, e.rdb, []string{base + "streams"}, base+"s:").Err(); err != nil {
		return fmt.Errorf("redissession: %w", rediskit.Unavailable("deleting session events", err))
	}
	return nil
}
