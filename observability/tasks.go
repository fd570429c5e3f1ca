package observability

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/portcullis-mcp/portcullis/tasks"
)

// TaskBuckets are the classic bucket boundaries, in seconds, of
// portcullis_task_duration_seconds: a task is a tool call long enough to
// be answered with a handle and polled, so its duration runs from a tenth
// of a second to the hour a task may live by default (tasks.ttl).
var TaskBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600}

// Values of the reason label of portcullis_tasks_refused_total: the
// reasons a [tasks.Observer] is told.
const (
	TaskRefusedOwnerCap   = tasks.RefusedOwnerCap
	TaskRefusedTotalCap   = tasks.RefusedTotalCap
	TaskRefusedStoreError = tasks.RefusedStoreError
)

// TaskRefusalReasons are the values of portcullis_tasks_refused_total's
// reason label. Other values are counted as [Other].
var TaskRefusalReasons = []string{TaskRefusedOwnerCap, TaskRefusedTotalCap, TaskRefusedStoreError}

// TaskStoreOps are the values of portcullis_task_store_errors_total's op
// label: the store operations a [tasks.Observer] is told failed. Other
// values are counted as [Other].
var TaskStoreOps = tasks.StoreOps

// taskLiveStatuses and taskEndStatuses are the values of the status label
// of the live gauge and of the finished counter and duration histogram.
var (
	taskLiveStatuses = []tasks.Status{tasks.StatusWorking, tasks.StatusInputRequired}
	taskEndStatuses  = []tasks.Status{tasks.StatusCompleted, tasks.StatusFailed, tasks.StatusCancelled}
)

// TaskMetricsOptions configures [Metrics.Tasks]. The zero value is usable:
// every tool is labelled [Other], every task is the root server's, the
// store is always up and no live task is ever old.
type TaskMetricsOptions struct {
	// KnownTool reports whether the server named server (empty for the
	// root server) has a tool of that name; other names are labelled
	// [Other], as in every other tool label of the package. Nil treats
	// every tool as unregistered.
	KnownTool func(server, name string) bool
	// OriginalTool returns the root server's name of a tool the server
	// named server renamed, for portcullis_tool_original; empty, or the
	// name itself, when it did not. Nil means no tool is renamed.
	OriginalTool func(server, name string) string
	// Servers are the names of the virtual servers; the
	// portcullis_server of a task of any other server (one a replica of
	// another configuration started) is [Other].
	Servers []string
	// StoreUp reports whether the task store answered its last check;
	// portcullis_task_store_up is 1 when it returns true. It runs on every
	// scrape, so it must return a state already known, never call the
	// store. Nil means the store cannot fail (the in-memory store): 1.
	StoreUp func() bool
	// OldestLive returns the age of the oldest live (working or
	// input_required) task this replica runs, 0 when it runs none; it is
	// portcullis_task_oldest_live_seconds. It runs on every scrape and
	// must be cheap. Nil means 0.
	OldestLive func() time.Duration
}

// TaskMetrics counts what a task manager does, on this replica: it is the
// [tasks.Observer] that the root package hands the manager. Build it with
// [Metrics.Tasks]; its methods are safe for concurrent use and never
// block.
type TaskMetrics struct {
	knownTool   func(server, name string) bool
	original    func(server, name string) string
	servers     []string
	created     *prometheus.CounterVec
	refused     *prometheus.CounterVec
	live        *prometheus.GaugeVec
	finished    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	lost        *prometheus.CounterVec
	storeErrors *prometheus.CounterVec
}

var _ tasks.Observer = (*TaskMetrics)(nil)

// Tasks registers the task series on m's registry and returns the
// observer that records them. Call it once per Metrics: a second call
// panics, as registering a series twice does.
//
// Every series without a tool label exists from the start, at zero (each
// live status of the root server and of each of o.Servers, each store
// operation's errors, the store's up gauge and the oldest task's age), as
// do the tool series of [Other]; [TaskMetrics.Declare] creates those of a
// tool that runs as a task.
func (m *Metrics) Tasks(o TaskMetricsOptions) *TaskMetrics {
	known := o.KnownTool
	if known == nil {
		known = func(string, string) bool { return false }
	}
	original := o.OriginalTool
	if original == nil {
		original = func(string, string) string { return "" }
	}
	storeUp := o.StoreUp
	if storeUp == nil {
		storeUp = func() bool { return true }
	}
	oldest := o.OldestLive
	if oldest == nil {
		oldest = func() time.Duration { return 0 }
	}
	labels := func(ls ...string) []string { return append(ls, LabelServer, LabelToolOriginal) }
	t := &TaskMetrics{
		knownTool: known,
		original:  original,
		servers:   o.Servers,
		created: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_tasks_created_total",
			Help: "Tasks (tool calls answered with a task handle) created on this replica, by server and tool.",
		}, labels("tool")),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_tasks_refused_total",
			Help: "Tasks not created, by server, tool and reason: owner_cap (the caller has its maximum of live tasks), total_cap (the server has its maximum), store_error (the task store failed).",
		}, labels("tool", "reason")),
		live: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "portcullis_tasks_live",
			Help: "Live tasks this replica runs now, by server and status (working, input_required); the sum over replicas is the cluster's.",
		}, []string{"status", LabelServer}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_tasks_finished_total",
			Help: "Tasks this replica ran that ended, by server, tool and status (completed, failed, cancelled).",
		}, labels("tool", "status")),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                            "portcullis_task_duration_seconds",
			Help:                            "Duration of tasks this replica ran, from creation to their end, by server, tool and status.",
			Buckets:                         TaskBuckets,
			NativeHistogramBucketFactor:     nativeBucketFactor,
			NativeHistogramMaxBucketNumber:  nativeMaxBuckets,
			NativeHistogramMinResetDuration: nativeMinReset,
		}, labels("tool", "status")),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_tasks_lost_total",
			Help: "Live tasks marked failed because the replica running them stopped renewing its lease (it stopped, or lost the task store), by server and tool.",
		}, labels("tool")),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_task_store_errors_total",
			Help: "Task store operations that failed, by op: create, get, update, stale (the search for tasks whose worker stopped), subscribe.",
		}, []string{"op"}),
	}
	up := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "portcullis_task_store_up",
		Help: "1 when the task store (memory or Redis) answered its last check, else 0.",
	}, func() float64 {
		if storeUp() {
			return 1
		}
		return 0
	})
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "portcullis_task_oldest_live_seconds",
		Help: "Age of the oldest live (working or input_required) task this replica runs, 0 when it runs none.",
	}, func() float64 { return oldest().Seconds() })

	for _, server := range append([]string{RootServer}, o.Servers...) {
		for _, s := range taskLiveStatuses {
			t.live.WithLabelValues(string(s), server)
		}
	}
	for _, op := range TaskStoreOps {
		t.storeErrors.WithLabelValues(op)
	}
	t.declare(toolLabels{server: RootServer, tool: Other})
	m.reg.MustRegister(t.created, t.refused, t.live, t.finished, t.duration, t.lost, t.storeErrors, up, age)
	return t
}

// Declare creates the series of a tool that runs as a task on the server
// named server (empty for the root server) before its first task: none
// created, refused for any reason, finished with any status or lost. A
// panel or alert then reads zero rather than nothing, and rate() and
// increase() see the first event. A tool the server does not have is
// declared as [Other].
func (t *TaskMetrics) Declare(server, tool string) { t.declare(t.labels(server, tool)) }

func (t *TaskMetrics) declare(l toolLabels) {
	t.created.WithLabelValues(l.values()...)
	for _, r := range TaskRefusalReasons {
		t.refused.WithLabelValues(l.values(r)...)
	}
	for _, s := range taskEndStatuses {
		t.finished.WithLabelValues(l.values(string(s))...)
		t.duration.WithLabelValues(l.values(string(s))...)
	}
	t.lost.WithLabelValues(l.values()...)
}

// toolLabels are the label values naming a tool of a server.
type toolLabels struct{ server, tool, original string }

// values returns the label values of a series: tool, then more, then the
// server and the original name.
func (l toolLabels) values(more ...string) []string {
	out := make([]string, 0, 4)
	out = append(out, l.tool)
	out = append(out, more...)
	return append(out, l.server, l.original)
}

// serverLabel bounds the name of a server to a label value: a server
// that is not the root or a configured one is [Other].
func (t *TaskMetrics) serverLabel(server string) string {
	if server != "" && !slices.Contains(t.servers, server) {
		return Other
	}
	return ServerLabel(server)
}

// labels bounds the names of a tool and its server to label values: a
// server that is not the root or a configured one is [Other], and so is
// a tool the server does not have.
func (t *TaskMetrics) labels(server, tool string) toolLabels {
	if t.serverLabel(server) == Other {
		return toolLabels{server: Other, tool: Other}
	}
	l := toolLabels{server: ServerLabel(server), tool: Other}
	if t.knownTool(server, tool) {
		l.tool = tool
		if orig := t.original(server, tool); orig != tool {
			l.original = orig
		}
	}
	return l
}

// Created counts a task of tool created on this replica.
func (t *TaskMetrics) Created(server, tool string) {
	t.created.WithLabelValues(t.labels(server, tool).values()...).Inc()
}

// Refused counts a task of tool that was not created, for reason (one of
// [TaskRefusalReasons]; any other is counted as [Other]).
func (t *TaskMetrics) Refused(server, tool, reason string) {
	if !slices.Contains(TaskRefusalReasons, reason) {
		reason = Other
	}
	t.refused.WithLabelValues(t.labels(server, tool).values(reason)...).Inc()
}

// Live adds delta to the live tasks of the server named server (empty for
// the root server) with status (working or input_required; any other is
// counted as [Other]) this replica runs.
func (t *TaskMetrics) Live(server string, status tasks.Status, delta int) {
	t.live.WithLabelValues(statusLabel(status, taskLiveStatuses), t.serverLabel(server)).Add(float64(delta))
}

// Finished counts a task of tool that this replica ran and that ended with
// status (completed, failed or cancelled; any other is counted as
// [Other]) after d.
func (t *TaskMetrics) Finished(server, tool string, status tasks.Status, d time.Duration) {
	values := t.labels(server, tool).values(statusLabel(status, taskEndStatuses))
	t.finished.WithLabelValues(values...).Inc()
	t.duration.WithLabelValues(values...).Observe(d.Seconds())
}

// Lost counts a task of tool marked failed because the replica running it
// stopped renewing its lease.
func (t *TaskMetrics) Lost(server, tool string) {
	t.lost.WithLabelValues(t.labels(server, tool).values()...).Inc()
}

// StoreError counts a failed store operation op (one of [TaskStoreOps];
// any other is counted as [Other]).
func (t *TaskMetrics) StoreError(op string) {
	if !slices.Contains(TaskStoreOps, op) {
		op = Other
	}
	t.storeErrors.WithLabelValues(op).Inc()
}

// statusLabel is s when it is one of allowed, else [Other].
func statusLabel(s tasks.Status, allowed []tasks.Status) string {
	if slices.Contains(allowed, s) {
		return string(s)
	}
	return Other
}
