package portcullis

import (
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
	"github.com/portcullis-mcp/portcullis/internal/sharedsession/redissession"
)

// sharedSessions returns where cfg.MCP.SessionStore says the replicas
// share legacy sessions: in Redis when it says so, or by default when
// Redis is configured; nowhere (the zero value) for memory, where each
// session stays on the replica that made it.
func sharedSessions(cfg *configFile, rdb redis.UniversalClient) (sharedsession.Backend, error) {
	switch {
	case cfg.MCP.SessionStore == "memory", cfg.MCP.SessionStore == "" && rdb == nil:
		return sharedsession.Backend{}, nil
	case rdb == nil:
		return sharedsession.Backend{}, fmt.Errorf("mcp.session_store: redis needs a Redis (redis.url, redis.sentinel or redis.cluster)")
	}
	return redissession.New(redisKit(cfg, rdb), cfg.Redis.KeyPrefix), nil
}
