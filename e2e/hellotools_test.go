//go:build e2e

package e2e

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// helloToolsDir is the example module: a team's server on the public API.
const helloToolsDir = "../examples/hello-tools"

// buildHelloTools builds the example module into a temporary folder.
func buildHelloTools(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hello-tools")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	build.Dir = helloToolsDir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", helloToolsDir, err, out)
	}
	return bin
}

// TestHelloToolsExample builds examples/hello-tools and checks that it is
// the portcullis binary plus its tool: in dev mode its hello tool answers
// the dev token over both protocol eras and sees the verified caller; with
// the conformance toolset it passes both revisions' requirement sets; and
// the chart, given only its image, renders a deployment it accepts.
func TestHelloToolsExample(t *testing.T) {
	bin := buildHelloTools(t)

	t.Run("dev mode", func(t *testing.T) {
		d := waitDevBanner(t, runBinary(t, bin, nil, "serve", "--dev", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"))
		m := regexp.MustCompile(`(?m)^\s*export MCP_TOKEN=(\S+)\s*$`).FindStringSubmatch(d.Banner)
		if m == nil {
			t.Fatalf("no `export MCP_TOKEN=…` line in the banner:\n%s", d.Banner)
		}
		token := m[1]

		tests := []struct {
			name   string
			call   func() json.RawMessage
			want   string
			caller string
		}{
			{
				name: "2025-11-25 initialize, then tools/call",
				call: func() json.RawMessage {
					h := legacySession(t, d.MCPURL(), token, "2025-11-25")
					return callOK(t, d.MCPURL(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hello","arguments":{"language":"fr"}}}`, h)
				},
				want: "Bonjour, dev-user!",
			},
			{
				name: "2026-07-28 stateless tools/call",
				call: func() json.RawMessage {
					return callOK(t, d.MCPURL(), modernToolCall(2, "hello", `{"name":"Ada","language":"de"}`), modernHeaders(token, "tools/call", "hello"))
				},
				want: "Hallo, Ada!",
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var res toolResult
				if err := json.Unmarshal(tt.call(), &res); err != nil {
					t.Fatal(err)
				}
				var out struct{ Greeting, Caller string }
				if err := json.Unmarshal(res.StructuredContent, &out); err != nil {
					t.Fatalf("structuredContent %s: %v", res.StructuredContent, err)
				}
				if res.IsError || out.Greeting != tt.want || out.Caller != "dev-user" {
					t.Errorf("hello: isError %v, greeting %q, caller %q; want %q from dev-user", res.IsError, out.Greeting, out.Caller, tt.want)
				}
			})
		}

		t.Run("no token", func(t *testing.T) {
			resp, body := postMCP(t, http.DefaultClient, d.MCPURL(), modernToolCall(2, "hello", `{"name":"Ada"}`), modernHeaders("", "tools/call", "hello"))
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("tools/call without a token: status %d, want 401: %s", resp.StatusCode, body)
			}
		})
	})

	t.Run("conformance", func(t *testing.T) {
		srv := runBinary(t, bin, []string{noDrainDelay, "PORTCULLIS_TOOLS_TOOLSETS=conformance"},
			"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0")
		conformanceRequirements(t, srv.MCPURL(), t.Logf)
	})

	t.Run("chart", func(t *testing.T) {
		r := helmTemplate(t, filepath.Join(helloToolsDir, "values.yaml"))
		var spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Image string `yaml:"image"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		}
		r.only(t, "Deployment").decodeSpec(t, &spec)
		const image = "registry.example.com/team/hello-tools:v0.1.0"
		if c := spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != image {
			t.Errorf("the Deployment runs %+v, want the one container %s", c, image)
		}
		d := prepareDeployment(t, r, nil)
		d.writeConfig(t)
		if len(d.args) == 0 || d.args[0] != "serve" {
			t.Fatalf("the container runs %q, want serve …", d.args)
		}
		cmd := exec.CommandContext(t.Context(), bin, append([]string{"check-config"}, d.args[1:]...)...)
		cmd.Env = serverEnv(d.env...)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "configuration OK") {
			t.Errorf("hello-tools check-config %s: %v\n%s", strings.Join(d.args[1:], " "), err, out)
		}
	})
}
