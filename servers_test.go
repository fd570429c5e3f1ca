package portcullis

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/portcullis-mcp/portcullis/internal/curation"
)

// serversBase is the configuration the servers tests add a servers list
// to: auth on, the core toolset, two upstreams (github with its default
// prefix, jira with none).
const serversBase = `auth:
  resource: https://mcp.example.com/mcp
  issuers: [{issuer: https://idp.example.com}]
upstreams:
  - {name: github, transport: http, url: https://github.example.com/mcp}
  - {name: jira, transport: http, url: https://jira.example.com/mcp, prefix: ""}
`

// loadServers loads serversBase (or base, when set) followed by yaml, as
// check-config does.
func loadServers(t *testing.T, base, yaml string, dev bool) (*configFile, error) {
	t.Helper()
	if base == "" {
		base = serversBase
	}
	path := filepath.Join(t.TempDir(), "portcullis.yaml")
	if err := os.WriteFile(path, []byte(base+yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFlags("check-config", nil, true)
	var args []string
	if dev {
		args = append(args, "--dev")
	}
	if err := f.parse(args); err != nil {
		t.Fatal(err)
	}
	return loadConfig(path, nil, f)
}

// problemLines returns the lines of a loadConfig error.
func problemLines(err error) []string {
	if err == nil {
		return nil
	}
	var lines []string
	for _, e := range unjoin(err) {
		lines = append(lines, strings.Split(e.Error(), "\n")...)
	}
	return lines
}

// TestServersValidation: each static problem of the servers list is
// reported with its key, and only it; several are reported at once.
func TestServersValidation(t *testing.T) {
	type want struct{ key, text string } // a problem: its key, and part of its text
	server := func(body string) string {
		return "servers:\n  - name: team-a\n    path: /mcp/team-a\n" + body
	}
	tests := []struct {
		name string
		base string // instead of serversBase
		yaml string
		dev  bool
		want []want
	}{
		{
			name: "three valid servers",
			yaml: `tools:
  toolsets: [core, workshop]
  prompts: [{name: greet, text: hello}]
servers:
  - name: platform
    path: /mcp/platform
    title: Platform
    instructions: Code and tickets.
    tools:
      - {source: github, name: "get_*"}
      - source: github
        name: search_code
        expose_as: code_search
        description: Search this company's code.
        annotations: {read_only_hint: true}
        arguments: {query: {description: What to look for., default: "lang:go"}}
      - {source: jira, name: search, expose_as: jira_search}
    prompts: [{source: declared, name: greet, expose_as: hello}]
    auth:
      required_scopes: [platform]
      policy: [{tool: code_search, scopes: [code]}]
  - name: data
    path: /data
    resource: https://data.example.com/data
    tools:
      - source: github
        name: query
        fixed_arguments: {database: analytics, Options: {timeout: 30}}
    resources: [{source: github, uri: "warehouse://tables/*"}, {source: github, uri: "warehouse://readme", title: Read me}]
    limits: {rate_per_principal: 5, burst_per_principal: 10}
  - name: support
    path: /mcp/support
    tools: [{source: core}, {source: workshop, name: weather, title: Weather}, {source: program}]
`,
		},
		{
			name: "name",
			yaml: `servers:
  - {name: Team_A, path: /a}
  - {name: root, path: /b}
  - {name: "", path: /c}
  - {name: ` + strings.Repeat("a", 64) + `, path: /d}
  - {name: ok, path: /e}
  - {name: ok, path: /f}
`,
			want: []want{
				{"servers[0].name", `"Team_A" must be 1 to 63 lowercase letters`},
				{"servers[1].name", `"root" is the name of the root server at /mcp`},
				{"servers[2].name", `"" must be 1 to 63`},
				{"servers[3].name", "must be 1 to 63"},
				{"servers[5].name", `"ok" is also the name of servers[4]`},
			},
		},
		{
			name: "path",
			yaml: `servers:
  - {name: s0, path: ""}
  - {name: s1, path: mcp/a}
  - {name: s2, path: /mcp/a/../b}
  - {name: s3, path: /mcp/./b}
  - {name: s4, path: /mcp//b}
  - {name: s5, path: /mcp/%2e%2e/b}
  - {name: s6, path: /mcp/a/}
  - {name: s7, path: /}
  - {name: s8, path: /mcp/Team-A}
  - {name: s9, path: /mcp}
  - {name: s10, path: /oauth}
  - {name: s11, path: /oauth/token}
  - {name: s12, path: /.well-known/oauth-protected-resource/mcp/a}
  - {name: s13, path: /healthz}
  - {name: s14, path: /readyz/x}
  - {name: s15, path: /dev-issuer/token}
  - {name: s16, path: "/mcp/a b"}
  - {name: s17, path: /mcp/a;b}
  - {name: s18, path: /mcp/a}
  - {name: s19, path: /mcp/a}
  - {name: s20, path: /oauthish}
  - {name: s21, path: /mcp/..}
`,
			want: []want{
				{"servers[0].path", "required"},
				{"servers[1].path", "must start with /"},
				{"servers[2].path", `must not hold a ".." segment`},
				{"servers[3].path", `must not hold a "." segment`},
				{"servers[4].path", "must not hold //"},
				{"servers[5].path", "must not hold %"},
				{"servers[6].path", "must not end with /"},
				{"servers[7].path", "must not end with /"},
				{"servers[8].path", "must be lowercase"},
				{"servers[9].path", "the root server's path"},
				{"servers[10].path", "collides with /oauth"},
				{"servers[11].path", "collides with /oauth"},
				{"servers[12].path", "collides with /.well-known"},
				{"servers[13].path", "collides with /healthz"},
				{"servers[14].path", "collides with /readyz"},
				{"servers[15].path", "collides with /dev-issuer"},
				{"servers[16].path", "may hold only lowercase letters"},
				{"servers[17].path", "may hold only lowercase letters"},
				{"servers[19].path", `"/mcp/a" is also the path of servers[18]`},
				{"servers[21].path", `must not hold a ".." segment`},
			},
		},
		{
			name: "resource",
			yaml: `servers:
  - {name: s0, path: /mcp/s0, resource: https://mcp.example.com/mcp/other}
  - {name: s1, path: /mcp/s1, resource: https://mcp.example.com/mcp}
  - {name: s2, path: /mcp/s2, resource: https://other.example.com/mcp/s2}
  - {name: s3, path: /mcp/s2x, resource: HTTPS://OTHER.example.com/mcp/s2}
  - {name: s4, path: /mcp/s4, resource: ftp://mcp.example.com/mcp/s4}
  - {name: s5, path: /mcp/s5, resource: "https://mcp.example.com/mcp/s5?a=b"}
  - {name: s6, path: /mcp/s6, resource: "https://mcp.example.com/mcp/s6#f"}
  - {name: s7, path: /mcp/s7, resource: mcp.example.com/mcp/s7}
`,
			want: []want{
				{"servers[0].resource", `must name the server's path /mcp/s0`},
				{"servers[1].resource", "must name the server's path"},
				{"servers[1].resource", "is auth.resource, the root server's"},
				{"servers[3].resource", "must name the server's path /mcp/s2x"},
				{"servers[3].resource", "is also the resource of servers[2]"},
				{"servers[4].resource", "must be an absolute https URL"},
				{"servers[5].resource", "must not have a query"},
				{"servers[6].resource", "must not have a fragment"},
				{"servers[7].resource", "must name the server's path"},
				{"servers[7].resource", "must be an absolute https URL"},
			},
		},
		{
			name: "a default resource equal to an explicit one",
			yaml: `servers:
  - {name: s0, path: /mcp/s0}
  - {name: s1, path: /mcp/s1, resource: https://mcp.example.com/mcp/s0}
`,
			want: []want{
				{"servers[1].resource", "must name the server's path /mcp/s1"},
				{"servers[1].resource", "is also the resource of servers[0]"},
			},
		},
		{
			name: "source",
			base: serversBase + "  - {name: core, transport: http, url: https://core.example.com/mcp}\n",
			yaml: server(`    tools:
      - {name: x}
      - {source: gihub}
      - {source: workshop}
      - {source: core}
      - {source: github}
      - {source: jira}
      - {source: program}
      - {source: declared}
    resources: [{source: nowhere}, {source: conformance}]
    prompts: [{source: ""}]
`),
			want: []want{
				{"servers[0].tools[0].source", "required"},
				{"servers[0].tools[1].source", `unknown source "gihub": want one of conformance, core, declared, github, jira, program, workshop`},
				{"servers[0].tools[2].source", "the workshop toolset is not enabled: add it to tools.toolsets"},
				{"servers[0].tools[3].source", `"core" names both a built-in source and an upstream`},
				{"servers[0].resources[0].source", `unknown source "nowhere"`},
				{"servers[0].resources[1].source", "the conformance toolset is not enabled"},
				{"servers[0].prompts[0].source", "required"},
			},
		},
		{
			name: "curation on a pattern",
			yaml: server(`    tools:
      - {source: github, name: "get_*", expose_as: get, title: Get, description: d, annotations: {read_only_hint: true}, arguments: {a: {description: x}}, fixed_arguments: {b: 1}}
      - {source: github, expose_as: all}
      - {source: github, name: "issue_?", description: d}
      - {source: github, name: "[a-c]*", title: t}
      - {source: github, name: 'a\*', title: t}
    resources:
      - {source: github, title: Everything}
      - {source: github, uri: "docs://*", expose_as: docs}
    prompts:
      - {source: github, name: "*", description: d}
`),
			want: []want{
				{"servers[0].tools[0].expose_as", `applies to one tool, but name "get_*" is a pattern`},
				{"servers[0].tools[0].title", "applies to one tool"},
				{"servers[0].tools[0].description", "applies to one tool"},
				{"servers[0].tools[0].annotations", "applies to one tool"},
				{"servers[0].tools[0].arguments", "applies to one tool"},
				{"servers[0].tools[0].fixed_arguments", "applies to one tool"},
				{"servers[0].tools[1].expose_as", `applies to one tool, but name "*" is a pattern`},
				{"servers[0].tools[2].description", "applies to one tool"},
				{"servers[0].tools[3].title", "applies to one tool"},
				{"servers[0].tools[4].title", "applies to one tool"},
				{"servers[0].resources[0].title", `applies to one resource, but uri "" is a pattern`},
				{"servers[0].resources[1].expose_as", "applies to one resource"},
				{"servers[0].prompts[0].description", `applies to one prompt, but name "*" is a pattern`},
			},
		},
		{
			name: "bad patterns",
			yaml: server(`    tools: [{source: github, name: "get_[a"}]
    resources: [{source: github, uri: "docs://[x"}]
    prompts: [{source: github, name: "\\"}]
`),
			want: []want{
				{"servers[0].tools[0].name", `bad pattern "get_[a"`},
				{"servers[0].resources[0].uri", `bad pattern "docs://[x"`},
				{"servers[0].prompts[0].name", `bad pattern "\\"`},
			},
		},
		{
			name: "exposed names",
			yaml: server(`    tools:
      - {source: github, name: search}
      - {source: core, name: echo, expose_as: github_search}
      - {source: jira, name: search}
      - {source: core, name: ping, expose_as: search}
      - {source: core, name: time, expose_as: "bad name"}
      - {source: core, name: calculator}
      - {source: core, name: calculator}
      - {source: core, name: calculator, expose_as: calc}
    prompts:
      - {source: github, name: summarize}
      - {source: declared, name: greet, expose_as: github_summarize}
      - {source: declared, name: bye, expose_as: "bad/name"}
`),
			want: []want{
				{"servers[0].tools[1].expose_as", `two tools named "github_search" (tools[0] exposes one)`},
				{"servers[0].tools[3].expose_as", `two tools named "search" (tools[2] exposes one)`},
				{"servers[0].tools[4].expose_as", `"bad name" must be 1 to 128 letters`},
				{"servers[0].tools[6].name", `two tools named "calculator" (tools[5] exposes one)`},
				{"servers[0].prompts[1].expose_as", `two prompts named "github_summarize" (prompts[0] exposes one)`},
				{"servers[0].prompts[2].expose_as", `"bad/name" must be 1 to 128`},
			},
		},
		{
			name: "the same name on two servers",
			yaml: `servers:
  - {name: a, path: /a, tools: [{source: core, name: echo, expose_as: say}]}
  - {name: b, path: /b, tools: [{source: core, name: ping, expose_as: say}]}
`,
		},
		{
			name: "arguments",
			yaml: server(`    tools:
      - source: github
        name: search
        arguments:
          owner: {description: The owner.}
          repo: {}
          limit: {default: 10}
          "": {description: x}
        fixed_arguments:
          owner: acme
          Region: eu
          region: us
          "": 1
          nothing: null
`),
			want: []want{
				{"servers[0].tools[0].arguments.", "an argument needs a name"},
				{"servers[0].tools[0].arguments.owner", `"owner" is also in fixed_arguments`},
				{"servers[0].tools[0].arguments.repo", "sets neither description nor default"},
				{"servers[0].tools[0].fixed_arguments.", "an argument needs a name"},
				{"servers[0].tools[0].fixed_arguments.region", `"Region" and "region" differ only in case`},
			},
		},
		{
			name: "a fixed value that is no JSON",
			yaml: server(`    tools: [{source: core, name: echo, fixed_arguments: {n: .nan}}]
`),
			want: []want{{"servers[0].tools[0].fixed_arguments.n (", "not a JSON value"}},
		},
		{
			name: "auth",
			yaml: server(`    auth:
      required_scopes: ["a b", ok]
      policy: [{tool: x, scopes: [s]}, {tool: x}, {tool: ""}, {tool: y, roles: [" "]}]
`),
			want: []want{
				{"servers[0].auth.required_scopes[0]", `invalid scope "a b"`},
				{"servers[0].auth.policy[1].tool", `duplicate tool "x"`},
				{"servers[0].auth.policy[2].tool", "required"},
				{"servers[0].auth.policy[3].roles[0]", "empty role"},
			},
		},
		{
			name: "required scopes without auth",
			base: "log: {level: info}\n",
			yaml: server("    auth: {required_scopes: [s]}\n"),
			want: []want{{"servers[0].auth.required_scopes", "set but no issuers or introspection are configured"}},
		},
		{
			name: "limits",
			yaml: server("    limits: {rate_per_principal: -1, burst_per_principal: -2}\n"),
			want: []want{
				{"servers[0].limits.burst_per_principal", "must not be negative"},
				{"servers[0].limits.rate_per_principal", "must be a positive number"},
			},
		},
		{
			name: "an unknown key",
			yaml: server("    tools: [{source: core, titel: x}]\n"),
			want: []want{{"servers[0].tools[0].titel (", "did you mean servers[0].tools[0].title?"}},
		},
		{
			name: "several problems at once, in several servers",
			yaml: `servers:
  - name: a
    path: /oauth/a
    tools: [{source: gihub, name: "*", title: All}]
  - name: a
    path: /mcp/b/
    resource: https://mcp.example.com/mcp
    limits: {rate_per_principal: -1}
`,
			want: []want{
				{"servers[0].path", "collides with /oauth"},
				{"servers[0].tools[0].source", "unknown source"},
				{"servers[0].tools[0].title", "applies to one tool"},
				{"servers[1].name", `"a" is also the name of servers[0]`},
				{"servers[1].path", "must not end with /"},
				{"servers[1].resource", "is auth.resource"},
				{"servers[1].limits.rate_per_principal", "must be a positive number"},
			},
		},
		{
			name: "dev: a server's resource off loopback",
			base: "log: {level: info}\n",
			yaml: `servers:
  - {name: a, path: /mcp/a}
  - {name: b, path: /mcp/b, resource: https://mcp.example.com/mcp/b}
  - {name: c, path: /mcp/c, resource: "http://127.0.0.1:8080/mcp"}
`,
			dev: true,
			want: []want{
				{"servers[1].resource", "is not on a loopback host"},
				{"servers[2].resource", "must name the server's path /mcp/c"},
				{"servers[2].resource", "is auth.resource, the root server's"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadServers(t, tt.base, tt.yaml, tt.dev)
			got := problemLines(err)
			unmatched := append([]string(nil), got...)
			for _, w := range tt.want {
				i := -1
				for j, line := range unmatched {
					if strings.HasPrefix(line, w.key) && strings.Contains(line, w.text) {
						i = j
						break
					}
				}
				if i < 0 {
					t.Errorf("no problem %s: …%s…", w.key, w.text)
					continue
				}
				unmatched = append(unmatched[:i], unmatched[i+1:]...)
			}
			for _, line := range unmatched {
				t.Errorf("unexpected problem: %s", line)
			}
		})
	}
}

// TestServersDefaults: a server's resource is auth.resource's scheme and
// host followed by its path; a selection's name is "*"; the limits are
// the limits section's unless set.
func TestServersDefaults(t *testing.T) {
	tests := []struct {
		name string
		base string
		yaml string
		dev  bool
		want []virtualServer
	}{
		{
			name: "resource from auth.resource, with its port",
			base: "auth:\n  resource: https://mcp.example.com:8443/mcp\n  issuers: [{issuer: https://idp.example.com}]\n",
			yaml: "servers:\n  - {name: a, path: /mcp/a}\n  - {name: b, path: /b, resource: https://b.example.com/b}\n",
			want: []virtualServer{
				{Name: "a", Path: "/mcp/a", Resource: "https://mcp.example.com:8443/mcp/a", Limits: virtualServerLimits{RatePerPrincipal: 50, BurstPerPrincipal: 100}},
				{Name: "b", Path: "/b", Resource: "https://b.example.com/b", Limits: virtualServerLimits{RatePerPrincipal: 50, BurstPerPrincipal: 100}},
			},
		},
		{
			name: "no resource without auth.resource",
			base: "log: {level: info}\n",
			yaml: "servers:\n  - {name: a, path: /mcp/a}\n",
			want: []virtualServer{{Name: "a", Path: "/mcp/a", Limits: virtualServerLimits{RatePerPrincipal: 50, BurstPerPrincipal: 100}}},
		},
		{
			name: "names and limits",
			base: "limits: {rate_per_principal: 7, burst_per_principal: 9}\n",
			yaml: `servers:
  - name: a
    path: /a
    tools: [{source: core}, {source: core, name: echo}]
    resources: [{source: declared}]
    prompts: [{source: declared}]
    limits: {rate_per_principal: 2}
`,
			want: []virtualServer{{
				Name: "a", Path: "/a",
				Exposure: curation.Exposure{
					Tools:     []curation.ToolSelection{{Source: "core", Name: "*"}, {Source: "core", Name: "echo"}},
					Resources: []curation.ResourceSelection{{Source: "declared"}},
					Prompts:   []curation.PromptSelection{{Source: "declared", Name: "*"}},
				},
				Limits: virtualServerLimits{RatePerPrincipal: 2, BurstPerPrincipal: 9},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadServers(t, tt.base, tt.yaml, tt.dev)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.Servers, tt.want) {
				got, _ := json.Marshal(cfg.Servers)
				want, _ := json.Marshal(tt.want)
				t.Errorf("servers\n got  %s\n want %s", got, want)
			}
		})
	}
}

// TestServersDefaultResourceInDev: serve --dev sets auth.resource once it
// listens, and the servers' resources follow it.
func TestServersDefaultResourceInDev(t *testing.T) {
	cfg, err := loadServers(t, "log: {level: info}\n", "servers:\n  - {name: a, path: /mcp/a}\n", true)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Servers[0].Resource != "" {
		t.Fatalf("resource %q before the listener's address is known", cfg.Servers[0].Resource)
	}
	if _, err := setupDev(cfg, "127.0.0.1:18080"); err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Servers[0].Resource, "http://127.0.0.1:18080/mcp/a"; got != want {
		t.Errorf("resource %q, want %q", got, want)
	}
}

// TestServersCurationDecoded: the curation keys reach the Go types as
// written, JSON values as JSON.
func TestServersCurationDecoded(t *testing.T) {
	cfg, err := loadServers(t, "", `servers:
  - name: data
    path: /mcp/data
    tools:
      - source: github
        name: query
        expose_as: run_query
        title: Run a query
        description: Runs SQL on the warehouse.
        annotations: {read_only_hint: true, open_world_hint: false}
        arguments:
          sql: {description: The SQL., default: "select 1"}
        fixed_arguments:
          database: analytics
          options: {timeout: 30, tags: [a, b]}
`, false)
	if err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	want := curation.ToolSelection{
		Source: "github", Name: "query", ExposeAs: "run_query", Title: "Run a query", Description: "Runs SQL on the warehouse.",
		Annotations: curation.Annotations{ReadOnlyHint: &yes, OpenWorldHint: &no},
		Arguments:   map[string]curation.Argument{"sql": {Description: "The SQL.", Default: json.RawMessage(`"select 1"`)}},
		FixedArguments: map[string]json.RawMessage{
			"database": json.RawMessage(`"analytics"`),
			"options":  json.RawMessage(`{"timeout":30,"tags":["a","b"]}`),
		},
	}
	if got := cfg.Servers[0].Tools[0]; !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Errorf("tool selection\n got  %s\n want %s", g, w)
	}
}

// TestServersDocExample: the complete example of docs/servers.md has no
// problem in its servers list (the files it names are not on this
// machine, so other sections may have).
func TestServersDocExample(t *testing.T) {
	md, err := os.ReadFile("docs/servers.md")
	if err != nil {
		t.Fatal(err)
	}
	_, example, ok := strings.Cut(string(md), "```yaml\n")
	if !ok {
		t.Fatal("docs/servers.md has no yaml example")
	}
	example, _, _ = strings.Cut(example, "```")
	if !strings.Contains(example, "servers:") {
		t.Fatal("the first example of docs/servers.md has no servers list")
	}
	_, err = loadServers(t, "log: {level: info}\n", example, false)
	for _, line := range problemLines(err) {
		if strings.HasPrefix(line, "servers") {
			t.Errorf("docs/servers.md: %s", line)
		}
	}
}
