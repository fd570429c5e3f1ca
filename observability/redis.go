package observability

import "github.com/prometheus/client_golang/prometheus"

// RedisMetrics records what the root package learns of the Redis that
// replicas share: whether it answers, and each switch of a primary. Build
// it with [Metrics.Redis]; its methods are safe for concurrent use.
type RedisMetrics struct {
	up        prometheus.Gauge
	failovers prometheus.Counter
}

// Redis registers the Redis series on m's registry, for a deployment of
// mode: "single" (one server), "sentinel" or "cluster", the mode label of
// portcullis_redis_failovers_total. Call it once per Metrics, and only
// when Redis is configured: without Redis there are no Redis series. Both
// series exist from the start: up at 0 until the first check, the
// failover count at 0.
func (m *Metrics) Redis(mode string) *RedisMetrics {
	r := &RedisMetrics{
		up: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "portcullis_redis_up",
			Help: "1 when Redis (the one server, the primary the sentinels name, or every Cluster primary) answered this replica's last check, every 5s; else 0.",
		}),
	}
	failovers := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "portcullis_redis_failovers_total",
		Help: "Switches of a Redis primary this replica observed, by mode: sentinel (the sentinels' +switch-master), cluster (a replica promoted, in CLUSTER NODES); one server (single) cannot fail over. Each replica counts each switch: take the max across replicas, not the sum.",
	}, []string{"mode"})
	r.failovers = failovers.WithLabelValues(mode)
	m.reg.MustRegister(r.up, failovers)
	return r
}

// SetUp records whether Redis answered the last check.
func (r *RedisMetrics) SetUp(up bool) {
	if up {
		r.up.Set(1)
	} else {
		r.up.Set(0)
	}
}

// Failover counts one switch of a primary.
func (r *RedisMetrics) Failover() { r.failovers.Inc() }
