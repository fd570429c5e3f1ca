package portcullis

import (
	"reflect"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
	"github.com/portcullis-mcp/portcullis/internal/sharedsession/redissession"
)

// TestSharedSessions checks where mcp.session_store shares legacy
// sessions: the Redis store, log and bus, under the key prefix, whenever
// the session store is Redis, so that no replica shares sessions without
// their streams; nowhere for memory.
func TestSharedSessions(t *testing.T) {
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
			shared, err := sharedSessions(cfg, tt.rdb)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want one: %v", err, tt.wantErr)
			}
			if !tt.wantRedis {
				if shared != (sharedsession.Backend{}) {
					t.Fatalf("shared %+v; want nothing shared", shared)
				}
				return
			}
			if want := redissession.New(redisKit(cfg, tt.rdb), "p:"); !reflect.DeepEqual(shared, want) {
				t.Fatalf("shared %#v; want the store, log and bus in the Redis given, under p: (%#v)", shared, want)
			}
		})
	}
}
