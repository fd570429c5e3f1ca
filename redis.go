package portcullis

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/limits/redisrate"
	"github.com/portcullis-mcp/portcullis/internal/redisconn"
	"github.com/portcullis-mcp/portcullis/internal/rediskit"
	"github.com/portcullis-mcp/portcullis/observability"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// openRedis returns a client for the configured Redis, or nil when none is
// configured. A Redis that does not answer at start is logged, not fatal:
// the task store and the shared rate limits reach it once it is up, and
// degrade until then (see docs/tasks.md). Until the client is closed, a
// redisconn.Watcher checks that Redis answers and counts primary switches
// in metrics (portcullis_redis_up, portcullis_redis_failovers_total).
func openRedis(ctx context.Context, cfg *configFile, metrics *observability.Metrics, logger *slog.Logger) (redis.UniversalClient, error) {
	if !cfg.Redis.Enabled() {
		return nil, nil
	}
	for _, w := range cfg.Redis.Warnings() {
		logger.Warn(w)
	}
	// go-redis logs dial failures through its own logger, on stderr as
	// plain text; send them to the structured log instead.
	redis.SetLogger(redisLogger{logger})
	client, err := redisconn.New(cfg.Redis)
	if err != nil {
		return nil, err
	}
	err = redisconn.Ping(ctx, client, cfg.Redis)
	if err != nil {
		logger.Warn("redis unreachable at start; task tools degrade and rate limits are per replica until it answers", "redis", cfg.Redis, "error", err)
	} else {
		logger.Info("redis reachable", "redis", cfg.Redis)
	}
	obs := metrics.Redis(cfg.Redis.Mode())
	obs.SetUp(err == nil)
	// The watch outlives ctx, which ends when draining starts: it ends when
	// the client is closed, after the drain.
	go redisWatcher(obs, cfg.Redis.Mode(), err == nil, logger).Run(context.WithoutCancel(ctx), client, cfg.Redis)
	return client, nil
}

// redisKit returns the Redis the stores share, with the durability of
// the redis.wait keys (how many replicas must hold each write a client is
// told of), or nil when rdb is nil.
func redisKit(cfg *configFile, rdb redis.UniversalClient) *rediskit.Client {
	if rdb == nil {
		return nil
	}
	return rediskit.New(rdb, rediskit.Durability{Replicas: cfg.Redis.WaitReplicas(), Timeout: cfg.Redis.WaitTimeout()})
}

// redisWatcher returns the watcher of the Redis deployment of mode, which
// records in obs and logs each failover and each change between
// answering and not (up is the state at start).
func redisWatcher(obs *observability.RedisMetrics, mode string, up bool, logger *slog.Logger) redisconn.Watcher {
	var wasUp atomic.Bool
	wasUp.Store(up)
	return redisconn.Watcher{
		OnCheck: func(up bool) {
			obs.SetUp(up)
			switch {
			case wasUp.Swap(up) == up:
			case up:
				logger.Info("redis answers again")
			default:
				logger.Warn("redis does not answer; tasks, shared sessions, the authorization server and shared rate limits degrade until it does (see docs/runbook.md#portcullisredisdown)")
			}
		},
		OnFailover: func(from, to string) {
			obs.Failover()
			logger.Warn("redis primary switched", "mode", mode, "from", from, "to", to)
		},
		Logger: logger,
	}
}

// redisLogger is go-redis's logger, writing to ours at debug level: the
// state changes that matter are logged by the task manager and the rate
// limiter.
type redisLogger struct{ logger *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.logger.DebugContext(ctx, "redis client", "message", fmt.Sprintf(format, v...))
}

// newTaskManager builds the task manager cfg.Tasks describes, on Redis
// when configured for it, counted in metrics, and marks the tools it lists
// as task tools in cat. views returns the view of a virtual server by its
// name, nil for any other (the root server's name is empty): the tasks of
// a virtual server are counted under its name and the names it exposes;
// it is called only once the server serves. It returns the metrics too,
// for the virtual servers to declare their task tools in.
func newTaskManager(cfg *configFile, cat *catalog.Catalog, rdb redis.UniversalClient, metrics *observability.Metrics, logger *slog.Logger, views func(server string) *catalog.ServerView) (*tasks.Manager, *observability.TaskMetrics, error) {
	for i, t := range cfg.Tasks.Tools {
		cat.SetTaskSupport(t.Name, tasks.ToolTasks{Support: t.Support})
		// An upstream's tools appear once it is connected; the server's
		// own are all known now.
		if len(cfg.Upstreams) == 0 && !cat.HasTool(t.Name) {
			logger.Warn("tasks.tools names a tool this server does not have; it marks nothing", "key", fmt.Sprintf("tasks.tools[%d].name", i), "tool", t.Name)
		}
	}
	var store tasks.Store = tasks.NewMemoryStore(nil)
	kind := "memory"
	if cfg.Tasks.Store == "redis" || (cfg.Tasks.Store == "" && rdb != nil) {
		if rdb == nil {
			return nil, nil, fmt.Errorf("tasks.store: redis needs a Redis (redis.url, redis.sentinel or redis.cluster)")
		}
		store = tasks.NewRedisStore(rdb, cfg.Redis.GroupPrefix("tasks"), nil, tasks.WaitForReplicas(cfg.Redis.WaitReplicas(), cfg.Redis.WaitTimeout()))
		kind = "redis"
	}
	var mgr *tasks.Manager
	obs := metrics.Tasks(observability.TaskMetricsOptions{
		KnownTool: func(server, name string) bool {
			if server == "" {
				return cat.HasTool(name)
			}
			v := views(server)
			return v != nil && v.HasTool(name)
		},
		OriginalTool: func(server, name string) string {
			if v := views(server); v != nil {
				return v.Original(name)
			}
			return name
		},
		Servers:    serverNames(cfg),
		StoreUp:    func() bool { return mgr.StoreUp() },
		OldestLive: func() time.Duration { return mgr.OldestLive() },
	})
	for _, name := range cat.ToolNames() {
		if cat.TaskSupport(name).Support != tasks.SupportNone {
			obs.Declare("", name)
		}
	}
	for _, t := range cfg.Tasks.Tools {
		obs.Declare("", t.Name)
	}
	mgr = tasks.NewManager(cfg.Tasks, tasks.Deps{Store: store, Observer: obs, Logger: logger})
	logger.Debug("task store", "store", kind)
	return mgr, obs, nil
}

// shareRateLimits moves the per-caller rate limits into Redis, so that they
// hold across replicas. When Redis fails, a request is limited by this
// replica's own bucket; the log says so once per outage (at most every
// 30s), with how many requests fell back.
func shareRateLimits(l *limits.Limiter, rdb redis.UniversalClient, prefix string, logger *slog.Logger) {
	if rdb == nil {
		return
	}
	var last atomic.Int64
	l.SetRateStore(redisrate.New(rdb, prefix), func(ctx context.Context, err error) {
		now := time.Now().UnixNano()
		prev := last.Load()
		if now-prev < int64(30*time.Second) || !last.CompareAndSwap(prev, now) {
			return
		}
		logger.WarnContext(ctx, "rate limits fell back to this replica's own buckets: redis failed", "error", err, "fallbacks", l.RateStoreFallbacks())
	})
}
