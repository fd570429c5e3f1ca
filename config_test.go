package portcullis

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestAuthorizationServerAloneValidates: with authorization_server on and
// no auth.issuers, the authorization server is the issuer, so
// auth.required_scopes is valid; without either it is still refused.
func TestAuthorizationServerAloneValidates(t *testing.T) {
	const base = "auth:\n  resource: https://mcp.example.com/mcp\n  required_scopes: [mcp:tools]\n"
	const as = "authorization_server:\n  enabled: true\n  idp:\n    issuer: https://idp.example.com\n    client_id: portcullis\n    client_secret_file: /run/secrets/idp\n"
	for _, tt := range []struct {
		name, yaml string
		ok         bool
	}{
		{name: "authorization server", yaml: base + as, ok: true},
		{name: "no issuer at all", yaml: base, ok: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "portcullis.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := loadConfig(path, nil, nil)
			if (err == nil) != tt.ok {
				t.Fatalf("loadConfig: %v, want ok %v", err, tt.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "auth.required_scopes") {
				t.Errorf("error %q does not name auth.required_scopes", err)
			}
		})
	}
}

// TestDrainDefaults: left unset, server.drain_delay is 5s and
// server.shutdown_grace 20s, which together stay under Kubernetes' default
// 30s grace period; an explicit 0s still means no delay, from the file or
// the environment; --dev, loopback only, waits for no balancer unless told.
func TestDrainDefaults(t *testing.T) {
	for _, tt := range []struct {
		name      string
		yaml      string
		env       []string
		dev       bool
		wantDrain time.Duration
	}{
		{name: "unset", yaml: "log:\n  level: info\n", wantDrain: 5 * time.Second},
		{name: "explicit zero", yaml: "server:\n  drain_delay: 0s\n", wantDrain: 0},
		{name: "explicit", yaml: "server:\n  drain_delay: 12s\n", wantDrain: 12 * time.Second},
		{name: "null keeps the default", yaml: "server:\n  drain_delay:\n", wantDrain: 5 * time.Second},
		{name: "zero from the environment", yaml: "server:\n  drain_delay: 12s\n", env: []string{"PORTCULLIS_SERVER_DRAIN_DELAY=0s"}, wantDrain: 0},
		{name: "dev unset", yaml: "log:\n  level: info\n", dev: true, wantDrain: 0},
		{name: "dev explicit", yaml: "server:\n  drain_delay: 3s\n", dev: true, wantDrain: 3 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "portcullis.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			f := newFlags("serve", io.Discard, true)
			var args []string
			if tt.dev {
				args = append(args, "--dev")
			}
			if err := f.parse(args); err != nil {
				t.Fatal(err)
			}
			cfg, err := loadConfig(path, tt.env, f)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Server.drainDelay(); got != tt.wantDrain {
				t.Errorf("drain_delay = %v, want %v", got, tt.wantDrain)
			}
			if got, want := cfg.Server.ShutdownGrace, 20*time.Second; got != want {
				t.Errorf("shutdown_grace = %v, want %v", got, want)
			}
			if sum := cfg.Server.drainDelay() + cfg.Server.ShutdownGrace; !tt.dev && tt.wantDrain == 5*time.Second && sum >= 30*time.Second {
				t.Errorf("drain_delay + shutdown_grace = %v, not under Kubernetes' default 30s grace period", sum)
			}
		})
	}
}
