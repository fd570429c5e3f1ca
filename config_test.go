package portcullis

import (
	"io"
	"os"
	"path/filepath"
	"strings"
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
