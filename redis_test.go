package portcullis

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
	"github.com/portcullis-mcp/portcullis/observability"
	"github.com/portcullis-mcp/portcullis/tasks"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// TestTaskToolsConfig: tasks.tools marks the tools it names as task tools,
// and a name the server has no tool for is logged with its key (with
// upstreams configured, their tools are not known yet, so nothing is).
func TestTaskToolsConfig(t *testing.T) {
	for _, tt := range []struct {
		name      string
		upstreams bool
		wantWarn  bool
	}{
		{name: "own tools only", wantWarn: true},
		{name: "with upstreams", upstreams: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &configFile{}
			cfg.Tasks.Tools = []tasks.ToolOption{
				{Name: "echo", Support: tasks.SupportOptional},
				{Name: "ecoh", Support: tasks.SupportRequired},
			}
			if tt.upstreams {
				cfg.Upstreams = make([]upstream.Options, 1)
			}
			cat, err := toolsets.New(toolsets.Options{}, toolsets.Deps{})
			if err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&log, nil))
			metrics := observability.NewMetrics(prometheus.NewRegistry(), observability.BuildInfo{})
			if _, _, err := newTaskManager(cfg, cat, nil, metrics, logger, func(string) *catalog.ServerView { return nil }); err != nil {
				t.Fatal(err)
			}
			if got := cat.TaskSupport("echo"); got.Support != tasks.SupportOptional {
				t.Errorf("echo: %+v, want optional", got)
			}
			warned := strings.Contains(log.String(), "tasks.tools[1].name") && strings.Contains(log.String(), "ecoh")
			if warned != tt.wantWarn || strings.Contains(log.String(), "tasks.tools[0]") {
				t.Errorf("log %q: want a warning for tasks.tools[1] only: %v", log.String(), tt.wantWarn)
			}
		})
	}
}
