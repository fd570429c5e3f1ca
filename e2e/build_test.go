//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildNamesPatches checks which SDK and fosite the binary under test
// was built with. make test runs the end-to-end tests against
// bin/portcullis, the shipped build (PORTCULLIS_E2E_BINARY): its version
// must name every patch of patches/go-sdk and patches/fosite for the
// versions go.mod requires, so a build that silently lost a patch fails
// here. Without PORTCULLIS_E2E_BINARY the tests build ../cmd/server with
// plain go build, as `go install` does, and the version must name none.
func TestBuildNamesPatches(t *testing.T) {
	out, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("portcullis version: %v\n%s", err, out)
	}
	version := strings.TrimSpace(string(out))
	shipped := os.Getenv("PORTCULLIS_E2E_BINARY") != ""
	if !shipped && strings.Contains(version, "patched") {
		t.Errorf("a plain go build names patches: %q", version)
	}

	for _, m := range []struct{ dir, module string }{
		{"go-sdk", "github.com/modelcontextprotocol/go-sdk"},
		{"fosite", "github.com/ory/fosite"},
	} {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", m.module).Output()
		if err != nil {
			t.Fatalf("go list -m %s: %v", m.module, err)
		}
		v := strings.TrimSpace(string(out))
		patches, err := filepath.Glob(filepath.Join("..", "patches", m.dir, v+"-*.patch"))
		if err != nil {
			t.Fatal(err)
		}
		named := strings.Contains(version, m.dir+" "+v+" patched: ")
		if m.dir == "go-sdk" && !strings.Contains(version, "go-sdk "+v) {
			t.Errorf("version %q does not name go-sdk %s", version, v)
		}
		if !shipped {
			continue
		}
		if len(patches) == 0 {
			if named {
				t.Errorf("no patch in patches/%s for %s, but the version names one: %q", m.dir, v, version)
			}
			continue
		}
		for _, p := range patches {
			name := strings.TrimPrefix(strings.TrimSuffix(filepath.Base(p), ".patch"), v+"-")
			if !named || !strings.Contains(version, name) {
				t.Errorf("the shipped build %s does not name the %s patch %s: %q (built without scripts/sdk-patch.sh?)", binary, m.dir, name, version)
			}
		}
	}
}
