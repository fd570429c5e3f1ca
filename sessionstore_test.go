package portcullis

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestNewSessionStore checks which session store and event log
// mcp.session_store gives: the Redis pair, under the key prefix, whenever
// the session store is Redis, so that no replica shares sessions without
// their streams; neither for memory.
func TestNewSessionStore(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { rdb.Close() })
	for _, tt := range []struct {
		name      string
		store     string
		rdb       redis.UniversalClient
		wantRedis bool
		wantErr   bool
	}{
		{name: "default without Redis"},
		{name: "default with Redis", rdb: rdb, wantRedis: true},
		{name: "memory with Redis", store: "memory", rdb: rdb},
		{name: "redis", store: "redis", rdb: rdb, wantRedis: true},
		{name: "redis without Redis", store: "redis", wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &configFile{}
			cfg.MCP.SessionStore = tt.store
			cfg.Redis.KeyPrefix = "p:"
			store, events, err := newSessionStore(cfg, tt.rdb)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want one: %v", err, tt.wantErr)
			}
			if !tt.wantRedis {
				if store != nil || events != nil {
					t.Fatalf("store %T, events %T; want neither", store, events)
				}
				return
			}
			s, ok1 := store.(*redisSessionStore)
			e, ok2 := events.(*redisSessionEvents)
			if !ok1 || !ok2 || s.rdb != tt.rdb || e.rdb != tt.rdb || e.prefix != "p:" || e.keep != sessionEventsKept {
				t.Fatalf("store %#v, events %#v; want both in the Redis given, events under p: keeping %d", store, events, sessionEventsKept)
			}
		})
	}
}
