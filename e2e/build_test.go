//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildNamesSDKPatches checks which SDK the binary under test was built
// with. make test runs the end-to-end tests against bin/portcullis, the
// shipped build (PORTCULLIS_E2E_BINARY): its version must name every patch
// of patches/go-sdk for the SDK version go.mod requires, so a build that
// silently lost a patch fails here. Without PORTCULLIS_E2E_BINARY the tests
// build ../cmd/server with plain go build, as `go install` does, and the
// version must name none.
func TestBuildNamesSDKPatches(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/modelcontextprotocol/go-sdk").Output()
	if err != nil {
		t.Fatalf("go list -m go-sdk: %v", err)
	}
	sdkVersion := strings.TrimSpace(string(out))
	patches, err := filepath.Glob(filepath.Join("..", "patches", "go-sdk", sdkVersion+"-*.patch"))
	if err != nil {
		t.Fatal(err)
	}

	out, err = exec.Command(binary, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("portcullis version: %v\n%s", err, out)
	}
	version := strings.TrimSpace(string(out))
	if !strings.Contains(version, "go-sdk "+sdkVersion) {
		t.Errorf("version %q does not name go-sdk %s", version, sdkVersion)
	}

	shipped := os.Getenv("PORTCULLIS_E2E_BINARY") != ""
	if !shipped {
		if strings.Contains(version, "patched") {
			t.Errorf("a plain go build names SDK patches: %q", version)
		}
		return
	}
	if len(patches) == 0 {
		if strings.Contains(version, "patched") {
			t.Errorf("no patch in patches/go-sdk for go-sdk %s, but the version names one: %q", sdkVersion, version)
		}
		return
	}
	for _, p := range patches {
		name := strings.TrimPrefix(strings.TrimSuffix(filepath.Base(p), ".patch"), sdkVersion+"-")
		if !strings.Contains(version, name) {
			t.Errorf("the shipped build %s does not name the SDK patch %s: %q (built without scripts/sdk-patch.sh?)", binary, name, version)
		}
	}
}
