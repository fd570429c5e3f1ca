package observability

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRedisMetrics: both series exist once Redis is configured (up at 0
// until the first check), and record checks and failovers under the
// deployment's mode.
func TestRedisMetrics(t *testing.T) {
	const head = `# HELP portcullis_redis_failovers_total Switches of a Redis primary this replica observed, by mode: sentinel (the sentinels' +switch-master), cluster (a replica promoted, in CLUSTER NODES); one server (single) cannot fail over. Each replica counts each switch: take the max across replicas, not the sum.
# TYPE portcullis_redis_failovers_total counter
`
	const upHead = `# HELP portcullis_redis_up 1 when Redis (the one server, the primary the sentinels name, or every Cluster primary) answered this replica's last check, every 5s; else 0.
# TYPE portcullis_redis_up gauge
`
	for _, tt := range []struct {
		name string
		mode string
		do   func(*RedisMetrics)
		want string
	}{
		{name: "at start", mode: "sentinel", do: func(*RedisMetrics) {},
			want: head + "portcullis_redis_failovers_total{mode=\"sentinel\"} 0\n" + upHead + "portcullis_redis_up 0\n"},
		{name: "up, two failovers", mode: "cluster", do: func(r *RedisMetrics) { r.SetUp(true); r.Failover(); r.Failover() },
			want: head + "portcullis_redis_failovers_total{mode=\"cluster\"} 2\n" + upHead + "portcullis_redis_up 1\n"},
		{name: "down again", mode: "single", do: func(r *RedisMetrics) { r.SetUp(true); r.SetUp(false) },
			want: head + "portcullis_redis_failovers_total{mode=\"single\"} 0\n" + upHead + "portcullis_redis_up 0\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := NewMetrics(reg, BuildInfo{})
			tt.do(m.Redis(tt.mode))
			if err := testutil.GatherAndCompare(reg, strings.NewReader(tt.want), "portcullis_redis_up", "portcullis_redis_failovers_total"); err != nil {
				t.Error(err)
			}
		})
	}
}
