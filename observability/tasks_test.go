package observability

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/portcullis-mcp/portcullis/tasks"
)

// Help texts of the task series, as a scrape shows them.
const (
	helpTasksCreated = `# HELP portcullis_tasks_created_total Tasks (tool calls answered with a task handle) created on this replica, by server and tool.
# TYPE portcullis_tasks_created_total counter
`
	helpTasksRefused = `# HELP portcullis_tasks_refused_total Tasks not created, by server, tool and reason: owner_cap (the caller has its maximum of live tasks), total_cap (the server has its maximum), store_error (the task store failed).
# TYPE portcullis_tasks_refused_total counter
`
	helpTasksLive = `# HELP portcullis_tasks_live Live tasks this replica runs now, by server and status (working, input_required); the sum over replicas is the cluster's.
# TYPE portcullis_tasks_live gauge
`
	helpTasksFinished = `# HELP portcullis_tasks_finished_total Tasks this replica ran that ended, by server, tool and status (completed, failed, cancelled).
# TYPE portcullis_tasks_finished_total counter
`
	helpTasksLost = `# HELP portcullis_tasks_lost_total Live tasks marked failed because the replica running them stopped renewing its lease (it stopped, or lost the task store), by server and tool.
# TYPE portcullis_tasks_lost_total counter
`
	helpTaskStoreErrors = `# HELP portcullis_task_store_errors_total Task store operations that failed, by op: create, get, update, stale (the search for tasks whose worker stopped), subscribe.
# TYPE portcullis_task_store_errors_total counter
`
	helpTaskStoreUp = `# HELP portcullis_task_store_up 1 when the task store (memory or Redis) answered its last check, else 0.
# TYPE portcullis_task_store_up gauge
`
	helpTaskOldest = `# HELP portcullis_task_oldest_live_seconds Age of the oldest live (working or input_required) task this replica runs, 0 when it runs none.
# TYPE portcullis_task_oldest_live_seconds gauge
`
)

func TestTaskMetrics(t *testing.T) {
	known := func(_, name string) bool { return name == "report" || name == "export" }
	tests := []struct {
		name  string
		opts  TaskMetricsOptions
		do    func(*TaskMetrics)
		names []string // the families compared
		want  string
	}{
		{
			name:  "series without a tool exist at zero from the start",
			opts:  TaskMetricsOptions{KnownTool: known},
			names: []string{"portcullis_tasks_live", "portcullis_task_store_errors_total", "portcullis_task_store_up", "portcullis_task_oldest_live_seconds"},
			want: helpTaskOldest + `portcullis_task_oldest_live_seconds 0
` + helpTaskStoreErrors + `portcullis_task_store_errors_total{op="create"} 0
portcullis_task_store_errors_total{op="get"} 0
portcullis_task_store_errors_total{op="stale"} 0
portcullis_task_store_errors_total{op="subscribe"} 0
portcullis_task_store_errors_total{op="update"} 0
` + helpTaskStoreUp + `portcullis_task_store_up 1
` + helpTasksLive + `portcullis_tasks_live{portcullis_server="root",status="input_required"} 0
portcullis_tasks_live{portcullis_server="root",status="working"} 0
`,
		},
		{
			name:  "a declared tool has every series at zero, beside _OTHER",
			opts:  TaskMetricsOptions{KnownTool: known},
			do:    func(m *TaskMetrics) { m.Declare("", "report") },
			names: []string{"portcullis_tasks_created_total", "portcullis_tasks_refused_total", "portcullis_tasks_finished_total", "portcullis_tasks_lost_total"},
			want: helpTasksCreated + `portcullis_tasks_created_total{portcullis_server="root",portcullis_tool_original="",tool="_OTHER"} 0
portcullis_tasks_created_total{portcullis_server="root",portcullis_tool_original="",tool="report"} 0
` + helpTasksFinished + `portcullis_tasks_finished_total{portcullis_server="root",portcullis_tool_original="",status="cancelled",tool="_OTHER"} 0
portcullis_tasks_finished_total{portcullis_server="root",portcullis_tool_original="",status="cancelled",tool="report"} 0
portcullis_tasks_finished_total{portcullis_server="root",portcullis_tool_original="",status="completed",tool="_OTHER"} 0
portcullis_tasks_finished_total{portcullis_server="root",portcullis_tool_original="",status="completed",tool="report"} 0
portcullis_tasks_finished_total{portcullis_server="root",portcullis_tool_original="",status="failed",tool="_OTHER"} 0
portcullis_tasks_finished_total{portcullis_server="root",portcullis_tool_original="",status="failed",tool="report"} 0
` + helpTasksLost + `portcullis_tasks_lost_total{portcullis_server="root",portcullis_tool_original="",tool="_OTHER"} 0
portcullis_tasks_lost_total{portcullis_server="root",portcullis_tool_original="",tool="report"} 0
` + helpTasksRefused + `portcullis_tasks_refused_total{portcullis_server="root",portcullis_tool_original="",reason="owner_cap",tool="_OTHER"} 0
portcullis_tasks_refused_total{portcullis_server="root",portcullis_tool_original="",reason="owner_cap",tool="report"} 0
portcullis_tasks_refused_total{portcullis_server="root",portcullis_tool_original="",reason="store_error",tool="_OTHER"} 0
portcullis_tasks_refused_total{portcullis_server="root",portcullis_tool_original="",reason="store_error",tool="report"} 0
portcullis_tasks_refused_total{portcullis_server="root",portcullis_tool_original="",reason="total_cap",tool="_OTHER"} 0
portcullis_tasks_refused_total{portcullis_server="root",portcullis_tool_original="",reason="total_cap",tool="report"} 0
`,
		},
		{
			name: "a task's life: created, working, input_required, working, completed",
			opts: TaskMetricsOptions{KnownTool: known},
			do: func(m *TaskMetrics) {
				m.Created("", "report")
				m.Live("", tasks.StatusWorking, 1)
				m.Live("", tasks.StatusWorking, -1)
				m.Live("", tasks.StatusInputRequired, 1)
				m.Live("", tasks.StatusInputRequired, -1)
				m.Live("", tasks.StatusWorking, 1)
				m.Created("", "export")
				m.Live("", tasks.StatusWorking, 1)
				m.Live("", tasks.StatusWorking, -1)
				m.Finished("", "report", tasks.StatusCompleted, 3*time.Second)
			},
			names: []string{"portcullis_tasks_created_total", "portcullis_tasks_live", "portcullis_tasks_finished_total"},
			want: helpTasksCreated + `portcullis_tasks_created_total{portcullis_server="root",portcullis_tool_original="",tool="_OTHER"} 0
portcullis_tasks_created_total{portcullis_server="root",portcullis_tool_original="",tool="export"} 1
portcullis_tasks_created_total{portcullis_server="root",portcullis_tool_original="",tool="report"} 1
` + helpTasksFinished + `portcullis_tasks_finished_total{portcullis_server="root",portcullis_tool_original="",status="cancelled",tool="_OTHER"} 0
portcullis_tasks_finished_total{portcullis_server="root",portcullis_tool_original="",status="completed",tool="_OTHER"} 0
portcullis_tasks_finished_total{portcullis_server="root",portcullis_tool_original="",status="completed",tool="report"} 1
portcullis_tasks_finished_total{portcullis_server="root",portcullis_tool_original="",status="failed",tool="_OTHER"} 0
` + helpTasksLive + `portcullis_tasks_live{portcullis_server="root",status="input_required"} 0
portcullis_tasks_live{portcullis_server="root",status="working"} 1
`,
		},
		{
			name: "live tasks by server, each configured server's at zero from the start",
			opts: TaskMetricsOptions{KnownTool: known, Servers: []string{"team-a", "team-b"}},
			do: func(m *TaskMetrics) {
				m.Live("team-a", tasks.StatusWorking, 1)
				m.Live("team-a", tasks.StatusWorking, 1)
				m.Live("team-a", tasks.StatusWorking, -1)
				m.Live("team-a", tasks.StatusInputRequired, 1)
				m.Live("", tasks.StatusWorking, 1)
				m.Live("not-configured", tasks.StatusWorking, 1)
			},
			names: []string{"portcullis_tasks_live"},
			want: helpTasksLive + `portcullis_tasks_live{portcullis_server="_OTHER",status="working"} 1
portcullis_tasks_live{portcullis_server="root",status="input_required"} 0
portcullis_tasks_live{portcullis_server="root",status="working"} 1
portcullis_tasks_live{portcullis_server="team-a",status="input_required"} 1
portcullis_tasks_live{portcullis_server="team-a",status="working"} 1
portcullis_tasks_live{portcullis_server="team-b",status="input_required"} 0
portcullis_tasks_live{portcullis_server="team-b",status="working"} 0
`,
		},
		{
			name: "caller-chosen tool names and unknown values are _OTHER",
			opts: TaskMetricsOptions{KnownTool: known},
			do: func(m *TaskMetrics) {
				m.Created("", "no-such-tool-1")
				m.Created("", "no-such-tool-2")
				m.Refused("", "no-such-tool-3", TaskRefusedOwnerCap)
				m.Refused("", "report", "made-up reason")
				m.Finished("", "no-such-tool-4", "paused", time.Second)
				m.Live("", tasks.StatusCompleted, 1) // a terminal status is never live
				m.Lost("", "no-such-tool-5")
				m.StoreError("flush")
				m.Declare("", "no-such-tool-6")
			},
			names: []string{"portcullis_tasks_created_total", "portcullis_tasks_refused_total", "portcullis_tasks_finished_total", "portcullis_tasks_live", "portcullis_tasks_lost_total", "portcullis_task_store_errors_total"},
			want: helpTaskStoreErrors + `portcullis_task_store_errors_total{op="_OTHER"} 1
portcullis_task_store_errors_total{op="create"} 0
portcullis_task_store_errors_total{op="get"} 0
portcullis_task_store_errors_total{op="stale"} 0
portcullis_task_store_errors_total{op="subscribe"} 0
portcullis_task_store_errors_total{op="update"} 0
` + helpTasksCreated + `portcullis_tasks_created_total{portcullis_server="root",portcullis_tool_original="",tool="_OTHER"} 2
` + helpTasksFinished + `portcullis_tasks_finished_total{portcullis_server="root",portcullis_tool_original="",status="_OTHER",tool="_OTHER"} 1
portcullis_tasks_finished_total{portcullis_server="root",portcullis_tool_original="",status="cancelled",tool="_OTHER"} 0
portcullis_tasks_finished_total{portcullis_server="root",portcullis_tool_original="",status="completed",tool="_OTHER"} 0
portcullis_tasks_finished_total{portcullis_server="root",portcullis_tool_original="",status="failed",tool="_OTHER"} 0
` + helpTasksLive + `portcullis_tasks_live{portcullis_server="root",status="_OTHER"} 1
portcullis_tasks_live{portcullis_server="root",status="input_required"} 0
portcullis_tasks_live{portcullis_server="root",status="working"} 0
` + helpTasksLost + `portcullis_tasks_lost_total{portcullis_server="root",portcullis_tool_original="",tool="_OTHER"} 1
` + helpTasksRefused + `portcullis_tasks_refused_total{portcullis_server="root",portcullis_tool_original="",reason="_OTHER",tool="report"} 1
portcullis_tasks_refused_total{portcullis_server="root",portcullis_tool_original="",reason="owner_cap",tool="_OTHER"} 1
portcullis_tasks_refused_total{portcullis_server="root",portcullis_tool_original="",reason="store_error",tool="_OTHER"} 0
portcullis_tasks_refused_total{portcullis_server="root",portcullis_tool_original="",reason="total_cap",tool="_OTHER"} 0
`,
		},
		{
			name: "refusals, lost tasks and store errors by their labels",
			opts: TaskMetricsOptions{KnownTool: known},
			do: func(m *TaskMetrics) {
				m.Refused("", "export", TaskRefusedTotalCap)
				m.Refused("", "export", TaskRefusedTotalCap)
				m.Refused("", "export", TaskRefusedStoreError)
				m.StoreError("create")
				m.StoreError("get")
				m.StoreError("get")
				m.Lost("", "report")
				m.Finished("", "report", tasks.StatusFailed, time.Minute)
			},
			names: []string{"portcullis_tasks_refused_total", "portcullis_tasks_lost_total", "portcullis_task_store_errors_total"},
			want: helpTaskStoreErrors + `portcullis_task_store_errors_total{op="create"} 1
portcullis_task_store_errors_total{op="get"} 2
portcullis_task_store_errors_total{op="stale"} 0
portcullis_task_store_errors_total{op="subscribe"} 0
portcullis_task_store_errors_total{op="update"} 0
` + helpTasksLost + `portcullis_tasks_lost_total{portcullis_server="root",portcullis_tool_original="",tool="_OTHER"} 0
portcullis_tasks_lost_total{portcullis_server="root",portcullis_tool_original="",tool="report"} 1
` + helpTasksRefused + `portcullis_tasks_refused_total{portcullis_server="root",portcullis_tool_original="",reason="owner_cap",tool="_OTHER"} 0
portcullis_tasks_refused_total{portcullis_server="root",portcullis_tool_original="",reason="store_error",tool="_OTHER"} 0
portcullis_tasks_refused_total{portcullis_server="root",portcullis_tool_original="",reason="store_error",tool="export"} 1
portcullis_tasks_refused_total{portcullis_server="root",portcullis_tool_original="",reason="total_cap",tool="_OTHER"} 0
portcullis_tasks_refused_total{portcullis_server="root",portcullis_tool_original="",reason="total_cap",tool="export"} 2
`,
		},
		{
			name: "store down and an old task, read at scrape time",
			opts: TaskMetricsOptions{
				StoreUp:    func() bool { return false },
				OldestLive: func() time.Duration { return 90*time.Minute + 500*time.Millisecond },
			},
			names: []string{"portcullis_task_store_up", "portcullis_task_oldest_live_seconds"},
			want: helpTaskOldest + `portcullis_task_oldest_live_seconds 5400.5
` + helpTaskStoreUp + `portcullis_task_store_up 0
`,
		},
		{
			name: "without KnownTool every tool is _OTHER",
			do: func(m *TaskMetrics) {
				m.Created("", "report")
				m.Declare("", "export")
			},
			names: []string{"portcullis_tasks_created_total"},
			want: helpTasksCreated + `portcullis_tasks_created_total{portcullis_server="root",portcullis_tool_original="",tool="_OTHER"} 1
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := NewMetrics(reg, BuildInfo{})
			tm := m.Tasks(tt.opts)
			if tt.do != nil {
				tt.do(tm)
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(tt.want), tt.names...); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestTaskDurationHistogram checks the task duration histogram: classic
// buckets from 0.1 s to an hour, observed in seconds, and a native
// histogram beside them, as the operation histogram has.
func TestTaskDurationHistogram(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, BuildInfo{})
	tm := m.Tasks(TaskMetricsOptions{KnownTool: func(_, n string) bool { return n == "report" }})
	for _, d := range []time.Duration{200 * time.Millisecond, 45 * time.Second, 50 * time.Minute, 2 * time.Hour} {
		tm.Finished("", "report", tasks.StatusCompleted, d)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "portcullis_task_duration_seconds" {
			continue
		}
		for _, mt := range f.GetMetric() {
			var tool, status string
			for _, l := range mt.GetLabel() {
				switch l.GetName() {
				case "tool":
					tool = l.GetValue()
				case "status":
					status = l.GetValue()
				}
			}
			if tool != "report" || status != "completed" {
				continue
			}
			h := mt.GetHistogram()
			if h.Schema == nil || len(h.GetPositiveSpan()) == 0 {
				t.Errorf("no native histogram: schema %v, %d positive spans", h.Schema, len(h.GetPositiveSpan()))
			}
			var le []float64
			cum := map[float64]uint64{}
			for _, b := range h.GetBucket() {
				le = append(le, b.GetUpperBound())
				cum[b.GetUpperBound()] = b.GetCumulativeCount()
			}
			if !slices.Equal(le, TaskBuckets) || le[0] != 0.1 || le[len(le)-1] != 3600 {
				t.Errorf("buckets %v, want TaskBuckets from 0.1 s to 1 h: %v", le, TaskBuckets)
			}
			for _, c := range []struct {
				le   float64
				want uint64
			}{{0.1, 0}, {0.25, 1}, {30, 1}, {60, 2}, {3600, 3}} {
				if cum[c.le] != c.want {
					t.Errorf("bucket le=%v holds %d, want %d", c.le, cum[c.le], c.want)
				}
			}
			if h.GetSampleCount() != 4 || h.GetSampleSum() != 0.2+45+3000+7200 {
				t.Errorf("count %d sum %v, want 4 and %v", h.GetSampleCount(), h.GetSampleSum(), 0.2+45+3000+7200)
			}
			return
		}
	}
	t.Fatal(`no portcullis_task_duration_seconds{tool="report", status="completed"} in the registry`)
}

// TestTasksRegistersOnce checks that a second call of Metrics.Tasks
// panics rather than silently recording into series nobody scrapes.
func TestTasksRegistersOnce(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), BuildInfo{})
	m.Tasks(TaskMetricsOptions{})
	defer func() {
		if recover() == nil {
			t.Error("a second Metrics.Tasks did not panic")
		}
	}()
	m.Tasks(TaskMetricsOptions{})
}

// TestTaskMetricsAreDocumented checks that the operator page on tasks
// (docs/tasks.md, whose metrics table docs/observability.md points to)
// names every task series, and every value of their bounded labels.
func TestTaskMetricsAreDocumented(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg, BuildInfo{}).Tasks(TaskMetricsOptions{})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fams {
		if n := f.GetName(); strings.HasPrefix(n, "portcullis_task") {
			names = append(names, n)
		}
	}
	if len(names) != 9 {
		t.Fatalf("found %d task families, want 9: %v", len(names), names)
	}
	values := slices.Concat(TaskRefusalReasons, TaskStoreOps)
	for _, s := range slices.Concat(taskLiveStatuses, taskEndStatuses) {
		values = append(values, string(s))
	}
	for _, doc := range []string{"../docs/tasks.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range slices.Concat(names, values) {
			if !strings.Contains(string(b), "`"+want+"`") {
				t.Errorf("%s does not name `%s`", doc, want)
			}
		}
	}
}
