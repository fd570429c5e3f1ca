//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBuildNamesPatches checks which SDK and fosite the binary under test
// was built with. make test runs the end-to-end tests against
// bin/portcullis, the shipped build (PORTCULLIS_E2E_BINARY): its version
// and its portcullis_build_info (labels sdk_patches and fosite_patches)
// must name every patch of patches/go-sdk and patches/fosite for the
// versions go.mod requires, so a build that silently lost a patch fails
// here. Without PORTCULLIS_E2E_BINARY the tests build ../cmd/server with
// plain go build, as `go install` does, and both must name none.
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
	info := buildInfoLabels(t)

	for _, m := range []struct{ dir, module, label string }{
		{"go-sdk", "github.com/modelcontextprotocol/go-sdk", "sdk_patches"},
		{"fosite", "github.com/ory/fosite", "fosite_patches"},
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
		label, ok := info[m.label]
		if !ok {
			t.Errorf("portcullis_build_info has no label %s: %v", m.label, info)
		}
		var want []string // the patch names the build should carry
		if shipped {
			for _, p := range patches {
				want = append(want, strings.TrimPrefix(strings.TrimSuffix(filepath.Base(p), ".patch"), v+"-"))
			}
		}
		var got []string
		if label != "" {
			got = strings.Split(label, ",")
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("portcullis_build_info{%s=%q}, want the %s patches %q", m.label, label, m.dir, want)
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
		for _, name := range want {
			if !named || !strings.Contains(version, name) {
				t.Errorf("the shipped build %s does not name the %s patch %s: %q (built without scripts/sdk-patch.sh?)", binary, m.dir, name, version)
			}
		}
	}
}

// buildInfoLabels returns the labels of portcullis_build_info in a scrape
// of the binary under test.
func buildInfoLabels(t *testing.T) map[string]string {
	t.Helper()
	srv := startServer(t, nil)
	_, families := exposedNames(t, scrape(t, srv.MetricsURL(t)))
	f := families["portcullis_build_info"]
	if f == nil || len(f.GetMetric()) != 1 {
		t.Fatalf("the scrape has no single portcullis_build_info: %v", f)
	}
	labels := map[string]string{}
	for _, l := range f.GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}
