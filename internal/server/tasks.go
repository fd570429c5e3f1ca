package server

import (
	"log/slog"
	"time"

	"github.com/portcullis-mcp/portcullis/observability"
	"github.com/portcullis-mcp/portcullis/tasks"
	"github.com/portcullis-mcp/portcullis/tools"
)

// newTaskManager builds the task manager cfg.Tasks describes, counted in
// metrics, and marks the tools it lists as task tools in cat.
func newTaskManager(cfg *Config, cat *tools.Catalog, metrics *observability.Metrics, logger *slog.Logger) (*tasks.Manager, error) {
	for _, t := range cfg.Tasks.Tools {
		cat.SetTaskSupport(t.Name, tasks.ToolTasks{Support: t.Support})
	}
	store := tasks.NewMemoryStore(nil)
	var mgr *tasks.Manager
	obs := metrics.Tasks(observability.TaskMetricsOptions{
		KnownTool:  cat.HasTool,
		StoreUp:    func() bool { return mgr.StoreUp() },
		OldestLive: func() time.Duration { return mgr.OldestLive() },
	})
	for _, name := range cat.ToolNames() {
		if cat.TaskSupport(name).Support != tasks.SupportNone {
			obs.Declare(name)
		}
	}
	for _, t := range cfg.Tasks.Tools {
		obs.Declare(t.Name)
	}
	mgr = tasks.NewManager(store, cfg.Tasks, obs, logger, nil)
	return mgr, nil
}
