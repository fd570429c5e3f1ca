//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestInspectorCLI drives the running binary with the MCP Inspector's CLI,
// a real client of another SDK (TypeScript), over Streamable HTTP.
func TestInspectorCLI(t *testing.T) {
	srv := startServer(t, []string{"PORTCULLIS_TOOLS_TOOLSETS=core"})
	dir := t.TempDir()
	inspector := func(t *testing.T, args ...string) toolRun {
		t.Helper()
		args = append([]string{"--cli", srv.MCPURL(), "--transport", "http"}, args...)
		run := runTool(t, 2*time.Minute, dir, "inspector", args...)
		if run.ExitCode != 0 {
			t.Fatalf("inspector %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), run.ExitCode, run.Stdout, run.Stderr)
		}
		return run
	}

	t.Run("tools/list", func(t *testing.T) {
		run := inspector(t, "--method", "tools/list")
		var res struct {
			Tools []struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		}
		if err := json.Unmarshal([]byte(run.Stdout), &res); err != nil {
			t.Fatalf("tools/list output is not JSON: %v\n%s", err, run.Stdout)
		}
		names := map[string]bool{}
		for _, tool := range res.Tools {
			names[tool.Name] = true
			if tool.Description == "" || len(tool.InputSchema) == 0 {
				t.Errorf("tool %q lacks a description or an input schema", tool.Name)
			}
		}
		for _, want := range []string{"PingME", "echo", "calculator", "time"} {
			if !names[want] {
				t.Errorf("tools/list has no %q:\n%s", want, run.Stdout)
			}
		}
	})

	t.Run("tools/call echo", func(t *testing.T) {
		run := inspector(t, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=hello")
		var res toolResult
		if err := json.Unmarshal([]byte(run.Stdout), &res); err != nil {
			t.Fatalf("tools/call output is not JSON: %v\n%s", err, run.Stdout)
		}
		if res.IsError || len(res.Content) == 0 || res.Content[0].Type != "text" || !strings.Contains(res.Content[0].Text, "hello") {
			t.Errorf("echo text=hello: %s, want a text block with hello and no error", run.Stdout)
		}
	})
}
