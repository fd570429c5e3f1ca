package portcullis

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/portcullis-mcp/portcullis/mcp"
)

// TestToolsetsListed: tools.toolsets absent serves the core toolset; an
// empty list serves no built-in tool (a gateway serving only upstreams).
func TestToolsetsListed(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		want       int // tools served
	}{
		{name: "absent", yaml: "log:\n  level: info\n", want: 5},
		{name: "empty", yaml: "tools:\n  toolsets: []\n", want: 0},
		{name: "workshop", yaml: "tools:\n  toolsets: [workshop]\n", want: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "portcullis.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := loadConfig(path, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			a, err := newApp(t.Context(), cfg, mcp.HTTP, extensions{}, process{stderr: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			if names := a.catalog.ToolNames(); len(names) != tt.want {
				t.Errorf("tools %v, want %d of them", names, tt.want)
			}
		})
	}
}
