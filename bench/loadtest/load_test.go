package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/portcullis-mcp/portcullis"
	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/upstream"
)

func TestCheckEcho(t *testing.T) {
	const ok = `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"w1-7"}]}}`
	tests := []struct {
		name        string
		contentType string
		body        string
		wantErr     string // "" means the response is right
	}{
		{name: "JSON", contentType: "application/json", body: ok},
		{name: "SSE after a priming event", contentType: "text/event-stream",
			body: "event: prime\nid: a_0\ndata: \n\nevent: message\nid: a_1\ndata: " + ok + "\n\n"},
		{name: "wrong id", contentType: "application/json", body: strings.Replace(ok, `"id":7`, `"id":8`, 1), wantErr: "id 8"},
		{name: "wrong text", contentType: "application/json", body: strings.Replace(ok, "w1-7", "w1-6", 1), wantErr: "want the text"},
		{name: "two blocks", contentType: "application/json",
			body: `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"w1-7"},{"type":"text","text":"x"}]}}`, wantErr: "want the text"},
		{name: "tool error", contentType: "application/json",
			body: `{"jsonrpc":"2.0","id":7,"result":{"isError":true,"content":[{"type":"text","text":"w1-7"}]}}`, wantErr: "tool error"},
		{name: "JSON-RPC error", contentType: "application/json",
			body: `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"bad"}}`, wantErr: "JSON-RPC error"},
		{name: "no result", contentType: "application/json", body: `{"jsonrpc":"2.0","id":7}`, wantErr: "no result"},
		{name: "not JSON", contentType: "application/json", body: `<html>`, wantErr: "not JSON"},
		{name: "empty stream", contentType: "text/event-stream", body: "event: prime\ndata: \n\n", wantErr: "without data"},
		{name: "other content type", contentType: "text/plain", body: ok, wantErr: "Content-Type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkEcho(tt.contentType, []byte(tt.body), 7, "w1-7")
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("checkEcho: %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("checkEcho: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseMetrics(t *testing.T) {
	page := `# HELP go_memstats_alloc_bytes_total Total bytes allocated.
# TYPE go_memstats_alloc_bytes_total counter
go_memstats_alloc_bytes_total 1.132272e+06
go_memstats_mallocs_total 10857 1700000000000
go_memstats_alloc_bytes 99
mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call"} 3
`
	got, err := parseMetrics(strings.NewReader(page), "go_memstats_alloc_bytes_total", "go_memstats_mallocs_total", "absent")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["go_memstats_alloc_bytes_total"] != 1132272 || got["go_memstats_mallocs_total"] != 10857 {
		t.Errorf("parseMetrics = %v, want the two counters (and no absent series)", got)
	}
	if _, err := parseMetrics(strings.NewReader("go_memstats_mallocs_total many\n"), "go_memstats_mallocs_total"); err == nil {
		t.Error("a value that is not a number must be an error")
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, c *config)
	}{
		{name: "defaults", check: func(t *testing.T, c *config) {
			if !slices.Equal(c.conc, []int{1, 16, 64}) || len(c.paths) != 2 || c.out != "results/bench.md" || len(c.env) != 0 {
				t.Errorf("config %+v", c)
			}
		}},
		{name: "pinned report", args: []string{"-pin"}, check: func(t *testing.T, c *config) {
			if c.out != "results/bench-pinned.md" {
				t.Errorf("out %q", c.out)
			}
		}},
		{name: "profile turns pprof on", args: []string{"-profile", "p", "-env", "GOGC=100"}, check: func(t *testing.T, c *config) {
			if c.profileDir != "p" || !slices.Equal(c.env, []string{"GOGC=100", "PORTCULLIS_SERVER_ALLOW_PPROF=true"}) {
				t.Errorf("profileDir %q, env %q", c.profileDir, c.env)
			}
		}},
		{name: "profile without measured rows", args: []string{"-profile", "p", "-smoke"}, wantErr: "-smoke"},
		{name: "bad concurrency", args: []string{"-concurrency", "1,x"}, wantErr: "-concurrency"},
		{name: "bad path", args: []string{"-paths", "2024-11-05"}, wantErr: "-paths"},
		{name: "bad env", args: []string{"-env", "GOGC"}, wantErr: "KEY=VALUE"},
		{name: "only some rows", args: []string{"-only", "portcullis, portcullis-stock"}, check: func(t *testing.T, c *config) {
			if !slices.Equal(c.only, []string{"portcullis", "portcullis-stock"}) {
				t.Errorf("only %q", c.only)
			}
		}},
		{name: "only the rows of portable sessions", args: []string{"-only", "portcullis,portcullis-redis-memory,portcullis-redis,portcullis-affinity,portcullis-replicas"}, check: func(t *testing.T, c *config) {
			if !slices.Equal(c.only, []string{"portcullis", redisMemoryRowName, redisRowName, affinityRowName, replicasRowName}) {
				t.Errorf("only %q", c.only)
			}
		}},
		{name: "only the virtual-server rows", args: []string{"-only", "portcullis,portcullis-virtual"}, check: func(t *testing.T, c *config) {
			if !slices.Equal(c.only, []string{"portcullis", virtualRowName}) {
				t.Errorf("only %q", c.only)
			}
		}},
		{name: "only an unknown server", args: []string{"-only", "portcullis,nginx"}, wantErr: "nginx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one about %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestPortcullisConfigUpstream(t *testing.T) {
	const url = "http://127.0.0.1:9/mcp"
	for _, upURL := range []string{"", url} {
		// The binary's own check, then the parts this test looks at.
		data := checkedConfig(t, pcOptions{addr: "127.0.0.1:1", upstreamURL: upURL})
		var c struct {
			Auth      auth.Options       `yaml:"auth"`
			Upstreams []upstream.Options `yaml:"upstreams"`
		}
		if err := yaml.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		var tools []string
		for _, p := range c.Auth.Policy {
			tools = append(tools, p.Tool)
		}
		if upURL == "" {
			if len(c.Upstreams) != 0 || !slices.Equal(tools, []string{"echo"}) {
				t.Errorf("no upstream: upstreams %+v, policy on %q", c.Upstreams, tools)
			}
			continue
		}
		if len(c.Upstreams) != 1 {
			t.Fatalf("upstreams %+v, want one", c.Upstreams)
		}
		u := c.Upstreams[0]
		if u.Transport != "http" || u.URL != url || u.Prefix == nil || *u.Prefix+"_echo" != "ref_echo" || !slices.Equal(u.Allow, []string{"echo"}) {
			t.Errorf("upstream %+v: want ref over http at %s, echo served as ref_echo", u, url)
		}
		if !slices.Equal(tools, []string{"echo", "ref_echo"}) {
			t.Errorf("policy on %q, want echo and ref_echo", tools)
		}
	}
}

func TestUpstreamTable(t *testing.T) {
	ms := time.Millisecond
	rep := &report{cfg: &config{paths: []string{pathModern}, conc: []int{1, 16}}, rows: []row{
		{server: upstreamName, path: pathModern, conc: 1, requests: 1000, p50: ms, cpuTicks: 10},
		{server: proxiedName, path: pathModern, conc: 1, requests: 1000, p50: ms + 100*time.Microsecond, cpuTicks: 5, up: true, upCPUTicks: 20},
		{server: upstreamName, path: pathModern, conc: 16, requests: 1000, elapsed: time.Second, p50: ms, cpuTicks: 10},
		{server: proxiedName, path: pathModern, conc: 16, requests: 600, elapsed: time.Second, p50: 2 * ms, cpuTicks: 12, up: true, upCPUTicks: 12},
	}}
	var b strings.Builder
	rep.upstreamTable(&b)
	got := b.String()
	for _, want := range []string{
		"| 2026-07-28 | 1 | 1.000 | 1.100 | +0.100 | 100 | 50 | 200 | 0.25 |",
		"≤ 0.15 ms: 0.100 ms, met",
		"≤ 120 µs (2026-07-28, c=16): 200 µs, **missed**",
		"≥ 70 % of its direct throughput through portcullis on the shared core (2026-07-28, c=16): 60 % (600 of 1000 req/s), **missed**",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("upstream table lacks %q:\n%s", want, got)
		}
	}
	rep.rows = rep.rows[:1]
	b.Reset()
	rep.upstreamTable(&b)
	if b.Len() != 0 {
		t.Errorf("without the proxied row there is no table, got:\n%s", b.String())
	}
}

func TestPortcullisConfigReplica(t *testing.T) {
	tests := []struct {
		name         string
		o            pcOptions
		wantResource string
		wantRedis    string
		wantStore    string
	}{
		{name: "alone", o: pcOptions{addr: "127.0.0.1:1"}, wantResource: "http://127.0.0.1:1/mcp"},
		{name: "sessions in Redis", o: pcOptions{addr: "127.0.0.1:1", redisURL: "redis://127.0.0.1:6/0"},
			wantResource: "http://127.0.0.1:1/mcp", wantRedis: "redis://127.0.0.1:6/0"},
		{name: "a replica behind a balancer", o: pcOptions{addr: "127.0.0.1:1", resource: "http://127.0.0.1:5/mcp", redisURL: "redis://127.0.0.1:6/0"},
			wantResource: "http://127.0.0.1:5/mcp", wantRedis: "redis://127.0.0.1:6/0"},
		{name: "a replica with affinity", o: pcOptions{addr: "127.0.0.1:1", resource: "http://127.0.0.1:5/mcp", redisURL: "redis://127.0.0.1:6/0", sessionStore: "memory"},
			wantResource: "http://127.0.0.1:5/mcp", wantRedis: "redis://127.0.0.1:6/0", wantStore: "memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := checkedConfig(t, tt.o)
			var c struct {
				Auth  auth.Options `yaml:"auth"`
				Redis struct {
					URL string `yaml:"url"`
				} `yaml:"redis"`
				MCP struct {
					SessionStore string `yaml:"session_store"`
				} `yaml:"mcp"`
			}
			if err := yaml.Unmarshal([]byte(data), &c); err != nil {
				t.Fatal(err)
			}
			if c.Auth.Resource != tt.wantResource || c.Redis.URL != tt.wantRedis || c.MCP.SessionStore != tt.wantStore {
				t.Errorf("resource %q, redis.url %q, mcp.session_store %q; want %q, %q, %q",
					c.Auth.Resource, c.Redis.URL, c.MCP.SessionStore, tt.wantResource, tt.wantRedis, tt.wantStore)
			}
		})
	}
}

func TestReplicasTable(t *testing.T) {
	sec := time.Second
	rows := func(replicated int64) []row {
		return []row{
			{server: "portcullis", path: pathLegacy, conc: 16, requests: 1000, elapsed: sec, cpuTicks: 30},
			{server: redisMemoryRowName, path: pathLegacy, conc: 16, requests: 950, elapsed: sec, cpuTicks: 30, storeCPUTicks: 5},
			{server: redisRowName, path: pathLegacy, conc: 16, requests: 900, elapsed: sec, cpuTicks: 30, storeCPUTicks: 9},
			{server: replicasRowName, path: pathLegacy, conc: 16, requests: replicated, elapsed: sec, cpuTicks: 40, storeCPUTicks: 8, lbCPUTicks: 8},
			{server: affinityRowName, path: pathLegacy, conc: 16, requests: 850, elapsed: sec, cpuTicks: 34},
		}
	}
	tests := []struct {
		name       string
		replicated int64
		rebuilt    float64
		want       []string
		wantErr    string
	}{
		{name: "kept", replicated: 800, rebuilt: 16, want: []string{
			"| 2025-11-25 | 16 | portcullis, sessions in Redis | 900 | 0.90 |",
			"| 2025-11-25 | 16 | 3 × portcullis behind HAProxy, sessions in Redis | 800 | 0.80 |",
			"| 500 | 100 | 100 | 700 |",
			"rebuilt from their records over the run: 16",
			"| 2025-11-25 | 16 | portcullis, Redis rate buckets, sessions in memory | 950 | 0.95 |",
			"| 2025-11-25 | 16 | 3 × portcullis behind HAProxy, affinity, sessions in memory | 850 | 0.85 |",
			"(2025-11-25, c=16), one replica: 94.7 % (900 of 950 req/s), met",
			"(2025-11-25, c=16), 3 replicas behind HAProxy (round robin; in memory, with affinity): 94.1 % (800 of 850 req/s), met",
			"against one replica without Redis (2025-11-25, c=16; pinned, they, HAProxy and Redis share its core): 80.0 % (800 of 1000 req/s)",
		}},
		{name: "not kept", replicated: 679, rebuilt: 16, want: []string{"with affinity): 79.9 % (679 of 850 req/s), **missed**"}},
		{name: "sessions that never moved", replicated: 800, wantErr: "rebuilt no session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := &report{cfg: &config{paths: []string{pathLegacy}, conc: []int{16}}, rows: rows(tt.replicated),
				rebuilt: tt.rebuilt, rebuiltKnown: true, spanPosts: 1}
			var b strings.Builder
			rep.replicasTable(&b)
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("table lacks %q:\n%s", w, b.String())
				}
			}
			err := rep.check()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("check: %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
	rep := &report{cfg: &config{paths: []string{pathLegacy}, conc: []int{16}}, rows: rows(800)[:1]}
	var b strings.Builder
	rep.replicasTable(&b)
	if b.Len() != 0 {
		t.Errorf("without the rows of portable sessions there is no table, got:\n%s", b.String())
	}
}

func TestPortcullisConfigVirtual(t *testing.T) {
	data := checkedConfig(t, pcOptions{addr: "127.0.0.1:1", virtual: true})
	var c struct {
		Auth    auth.Options `yaml:"auth"`
		Servers []struct {
			Name  string `yaml:"name"`
			Path  string `yaml:"path"`
			Tools []struct {
				Source         string         `yaml:"source"`
				Name           string         `yaml:"name"`
				ExposeAs       string         `yaml:"expose_as"`
				Description    string         `yaml:"description"`
				FixedArguments map[string]any `yaml:"fixed_arguments"`
			} `yaml:"tools"`
			Auth auth.Options `yaml:"auth"`
		} `yaml:"servers"`
	}
	if err := yaml.Unmarshal([]byte(data), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Servers) != 1 || len(c.Servers[0].Tools) != 1 {
		t.Fatalf("servers %+v, want one with one tool", c.Servers)
	}
	s, tool := c.Servers[0], c.Servers[0].Tools[0]
	if s.Path != virtualPath || tool.Source != "core" || tool.Name != "echo" || tool.ExposeAs != virtualTool || tool.Description == "" || len(tool.FixedArguments) != 0 {
		t.Errorf("server %+v: want core's echo at %s as %s, described, no argument fixed", s, virtualPath, virtualTool)
	}
	// The virtual server's calls pass the checks /mcp's do.
	if !slices.Equal(s.Auth.RequiredScopes, c.Auth.RequiredScopes) || len(s.Auth.Policy) != 1 || len(c.Auth.Policy) != 1 ||
		s.Auth.Policy[0].Tool != virtualTool || !slices.Equal(s.Auth.Policy[0].Scopes, c.Auth.Policy[0].Scopes) {
		t.Errorf("server auth %+v, want /mcp's required scopes %q and policy %+v on %s", s.Auth, c.Auth.RequiredScopes, c.Auth.Policy, virtualTool)
	}
	// Without the option, no server.
	if strings.Contains(portcullisConfig(pcOptions{addr: "127.0.0.1:1"}, "127.0.0.1:2", "http://127.0.0.1:3"), "servers:") {
		t.Error("a configuration without virtual has a servers section")
	}
}

func TestVirtualTable(t *testing.T) {
	sec := time.Second
	rows := func(virtualTicks int64) []row {
		return []row{
			{server: "portcullis", path: pathModern, conc: 16, requests: 1000, elapsed: sec, cpuTicks: 20},
			{server: virtualRowName, path: pathModern, conc: 16, requests: 1000, elapsed: sec, cpuTicks: virtualTicks},
			{server: "portcullis", path: pathLegacy, conc: 16, requests: 800, elapsed: sec, cpuTicks: 16},
			{server: virtualRowName, path: pathLegacy, conc: 16, requests: 760, elapsed: sec, cpuTicks: 16},
		}
	}
	tests := []struct {
		name         string
		virtualTicks int64 // the virtual row's CPU on the 2026-07-28 path, 1000 calls
		want         []string
	}{
		{name: "kept", virtualTicks: 21, want: []string{
			"| 2026-07-28 | 16 | 1000 | 1000 | 1.00 | 200 | 210 | 1.050 |",
			"(2026-07-28, c=16): 1.050× (210 µs against 200 µs), met",
			"| 2025-11-25 | 16 | 800 | 760 | 0.95 | 200 | 211 | 1.053 |",
			"(2025-11-25, c=16): 1.053× (211 µs against 200 µs), **missed**",
		}},
		{name: "missed", virtualTicks: 22, want: []string{
			"| 2026-07-28 | 16 | 1000 | 1000 | 1.00 | 200 | 220 | 1.100 |",
			"(2026-07-28, c=16): 1.100× (220 µs against 200 µs), **missed**",
		}},
		{name: "cheaper", virtualTicks: 19, want: []string{"(2026-07-28, c=16): 0.950× (190 µs against 200 µs), met"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := &report{cfg: &config{paths: []string{pathModern, pathLegacy}, conc: []int{16}}, rows: rows(tt.virtualTicks)}
			var b strings.Builder
			rep.virtualTable(&b)
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("table lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
	rep := &report{cfg: &config{paths: []string{pathModern}, conc: []int{16}}, rows: rows(20)[:1]}
	var b strings.Builder
	rep.virtualTable(&b)
	if b.Len() != 0 {
		t.Errorf("without the virtual row there is no table, got:\n%s", b.String())
	}
}

// checkedConfig returns the configuration portcullisConfig writes for o,
// after the binary's own check-config has loaded it.
func checkedConfig(t *testing.T, o pcOptions) string {
	t.Helper()
	data := portcullisConfig(o, "127.0.0.1:2", "http://127.0.0.1:3")
	path := filepath.Join(t.TempDir(), "portcullis.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := portcullis.Run(t.Context(), []string{"check-config", "--config", path}, portcullis.Environ(nil), portcullis.Streams(nil, nil, nil)); err != nil {
		t.Fatalf("the config does not load: %v\n%s", err, data)
	}
	return data
}
