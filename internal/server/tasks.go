package server

import (
	"log/slog"

	"github.com/portcullis-mcp/portcullis/tasks"
	"github.com/portcullis-mcp/portcullis/tools"
)

// newTaskManager builds the task manager cfg.Tasks describes and marks
// the tools it lists as task tools in cat.
func newTaskManager(cfg *Config, cat *tools.Catalog, logger *slog.Logger) (*tasks.Manager, error) {
	for _, t := range cfg.Tasks.Tools {
		cat.SetTaskSupport(t.Name, tasks.ToolTasks{Support: t.Support})
	}
	store := tasks.NewMemoryStore(nil)
	return tasks.NewManager(store, cfg.Tasks, nil, logger, nil), nil
}
