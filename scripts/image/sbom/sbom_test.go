package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// bom is the part of a CycloneDX document the tests read.
type bom struct {
	BOMFormat   string `json:"bomFormat"`
	SpecVersion string `json:"specVersion"`
	Metadata    struct {
		Component  component  `json:"component"`
		Properties []property `json:"properties"`
	} `json:"metadata"`
	Components   []component `json:"components"`
	Dependencies []struct {
		Ref       string   `json:"ref"`
		DependsOn []string `json:"dependsOn"`
	} `json:"dependencies"`
}

type component struct {
	BOMRef     string     `json:"bom-ref"`
	Name       string     `json:"name"`
	Version    string     `json:"version"`
	PURL       string     `json:"purl"`
	Properties []property `json:"properties"`
	Pedigree   *struct {
		Ancestors []component `json:"ancestors"`
		Patches   []struct {
			Type string `json:"type"`
			Diff struct {
				Text struct {
					Content string `json:"content"`
				} `json:"text"`
				URL string `json:"url"`
			} `json:"diff"`
		} `json:"patches"`
	} `json:"pedigree"`
}

type property struct{ Name, Value string }

func decode(t *testing.T, doc []byte) bom {
	t.Helper()
	var b bom
	if err := json.Unmarshal(doc, &b); err != nil {
		t.Fatal(err)
	}
	return b
}

// fixture is what cyclonedx-gomod bin writes for a binary whose SDK and
// fosite are replaced local copies, cut to what matters.
const fixture = `{
  "bomFormat": "CycloneDX", "specVersion": "1.6", "version": 1,
  "metadata": {"component": {"bom-ref": "pkg:golang/example.com/app@v1?type=module", "name": "example.com/app", "version": "v1"}},
  "components": [
    {"bom-ref": "pkg:golang/./.cache/sdk-patched/go-sdk@(devel)?type=module", "type": "library", "name": "./.cache/sdk-patched/go-sdk", "version": "(devel)", "purl": "pkg:golang/./.cache/sdk-patched/go-sdk@(devel)?type=module"},
    {"bom-ref": "pkg:golang/example.com/other@v2?type=module", "type": "library", "name": "example.com/other", "version": "v2"},
    {"bom-ref": "pkg:golang/./.cache/sdk-patched/fosite@(devel)?type=module", "type": "library", "name": "./.cache/sdk-patched/fosite", "version": "(devel)", "purl": "pkg:golang/./.cache/sdk-patched/fosite@(devel)?type=module"}
  ],
  "dependencies": [{"ref": "pkg:golang/example.com/app@v1?type=module", "dependsOn": ["pkg:golang/./.cache/sdk-patched/go-sdk@(devel)?type=module", "pkg:golang/example.com/other@v2?type=module", "pkg:golang/./.cache/sdk-patched/fosite@(devel)?type=module"]}]
}`

func TestComplete(t *testing.T) {
	sdk := Module{Path: "github.com/modelcontextprotocol/go-sdk", Version: "v1.8.0", Hash: "h1:KIvahhYqwtbeniWVPsfdNxcQDtvyMS3BHwaTkwCPSvg="}
	fosite := Module{Path: "github.com/ory/fosite", Version: "v0.49.0"}
	sdkPatches := []Patch{{Name: "a", Diff: "--- a/x\n+++ b/x\n"}, {Name: "b", Diff: "--- a/y\n+++ b/y\n"}}
	fositePatches := []Patch{{Name: "c", Diff: "--- a/z\n+++ b/z\n"}}
	out, err := Complete([]byte(fixture), "./.cache/sdk-patched/go-sdk", sdk, "go-sdk", sdkPatches)
	if err != nil {
		t.Fatal(err)
	}
	checkPatched(t, decode(t, out), sdk.Path, "go-sdk", sdk.Version, sdkPatches)
	out, err = Complete(out, "./.cache/sdk-patched/fosite", fosite, "fosite", fositePatches)
	if err != nil {
		t.Fatal(err)
	}
	b := decode(t, out)
	checkPatched(t, b, sdk.Path, "go-sdk", sdk.Version, sdkPatches)
	checkPatched(t, b, fosite.Path, "fosite", fosite.Version, fositePatches)
	if strings.Contains(string(out), "(devel)") || strings.Contains(string(out), "./.cache") {
		t.Errorf("the completed SBOM still names a local copy:\n%s", out)
	}
	if len(b.Components) != 3 || b.Components[1].Name != "example.com/other" {
		t.Errorf("other components changed: %+v", b.Components)
	}

	t.Run("no such component", func(t *testing.T) {
		if _, err := Complete([]byte(fixture), "./elsewhere", sdk, "go-sdk", sdkPatches); err == nil {
			t.Error("no error when no component is the replaced copy")
		}
	})
}

// checkPatched checks that b names module at version with patches, those
// of patches/dir, as its pedigree, and that the dependency graph points at
// it.
func checkPatched(t *testing.T, b bom, module, dir, version string, patches []Patch) {
	t.Helper()
	i := slices.IndexFunc(b.Components, func(c component) bool { return c.Name == module })
	if i < 0 {
		t.Fatalf("the SBOM has no %s component", module)
	}
	c := b.Components[i]
	if c.Version != version || c.PURL != "pkg:golang/"+module+"@"+version+"?type=module" {
		t.Errorf("%s version %q purl %q, want %s", module, c.Version, c.PURL, version)
	}
	if c.Pedigree == nil || len(c.Pedigree.Ancestors) != 1 || c.Pedigree.Ancestors[0].Version != version {
		t.Fatalf("%s pedigree %+v, want the released %s as ancestor", module, c.Pedigree, version)
	}
	if len(c.Pedigree.Patches) != len(patches) {
		t.Fatalf("%s has %d pedigree patches, want %d", module, len(c.Pedigree.Patches), len(patches))
	}
	for j, p := range patches {
		got := c.Pedigree.Patches[j]
		if got.Type != "unofficial" || got.Diff.Text.Content != p.Diff || !strings.HasSuffix(got.Diff.URL, "/patches/"+dir+"/"+version+"-"+p.Name+".patch") {
			t.Errorf("%s patch %d: type %q, url %q, diff of %d bytes; want %s's %d bytes", module, j, got.Type, got.Diff.URL, len(got.Diff.Text.Content), p.Name, len(p.Diff))
		}
		if !slices.Contains(c.Properties, property{Name: patchProperty(dir), Value: p.Name}) {
			t.Errorf("%s: no property %s=%s", module, patchProperty(dir), p.Name)
		}
	}
	var pointed bool
	for _, d := range b.Dependencies {
		pointed = pointed || slices.Contains(d.DependsOn, c.BOMRef)
	}
	if !pointed {
		t.Errorf("no dependency points at %s", c.BOMRef)
	}
}

// patchedModules are the modules scripts/sdk-patch.sh patches: the folder
// of patches/ and the module path.
var patchedModules = []struct{ dir, module string }{
	{"go-sdk", "github.com/modelcontextprotocol/go-sdk"},
	{"fosite", "github.com/ory/fosite"},
}

// TestShippedSBOMs checks the SBOMs `make sbom` wrote for the image's
// binaries ($PORTCULLIS_IMAGE_DIR/*/sbom.cdx.json): the SDK and fosite at
// the versions go.mod requires with every patch of patches/go-sdk and
// patches/fosite, no module left as a local path, the binary's hash and
// build tags.
func TestShippedSBOMs(t *testing.T) {
	dir := os.Getenv("PORTCULLIS_IMAGE_DIR")
	if dir == "" {
		t.Fatal("PORTCULLIS_IMAGE_DIR is not set: run make image-check (make image, make sbom, then these tests)")
	}
	gomod, err := os.ReadFile(filepath.Join("..", "..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{}
	patches := map[string][]Patch{}
	for _, pm := range patchedModules {
		m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(pm.module) + ` (v\S+)`).FindSubmatch(gomod)
		if m == nil {
			t.Fatalf("go.mod requires no %s", pm.module)
		}
		version := string(m[1])
		versions[pm.dir] = version
		files, _ := filepath.Glob(filepath.Join("..", "..", "..", "patches", pm.dir, version+"-*.patch"))
		slices.Sort(files)
		for _, f := range files {
			diff, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			patches[pm.dir] = append(patches[pm.dir], Patch{Name: strings.TrimPrefix(strings.TrimSuffix(filepath.Base(f), ".patch"), version+"-"), Diff: string(diff)})
		}
	}
	sboms, _ := filepath.Glob(filepath.Join(dir, "*", "sbom.cdx.json"))
	if len(sboms) != 2 {
		t.Fatalf("%d SBOMs under %s, want 2 (linux-amd64, linux-arm64): run make sbom", len(sboms), dir)
	}
	for _, path := range sboms {
		t.Run(filepath.Base(filepath.Dir(path)), func(t *testing.T) {
			doc, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b := decode(t, doc)
			if b.BOMFormat != "CycloneDX" || b.SpecVersion != "1.6" {
				t.Errorf("format %s %s, want CycloneDX 1.6", b.BOMFormat, b.SpecVersion)
			}
			if b.Metadata.Component.Name != "github.com/portcullis-mcp/portcullis" || b.Metadata.Component.Version == "" {
				t.Errorf("main component %q %q", b.Metadata.Component.Name, b.Metadata.Component.Version)
			}
			for _, pm := range patchedModules {
				if len(patches[pm.dir]) > 0 {
					checkPatched(t, b, pm.module, pm.dir, versions[pm.dir], patches[pm.dir])
				}
			}
			for _, c := range b.Components {
				if strings.HasPrefix(c.Name, ".") || strings.HasPrefix(c.Name, "/") || c.Version == "(devel)" {
					t.Errorf("component %s %s is a local path, not a module version", c.Name, c.Version)
				}
			}
			bin, err := os.ReadFile(filepath.Join(filepath.Dir(path), "portcullis"))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(bin)
			props := b.Metadata.Properties
			if !slices.Contains(props, property{Name: "cdx:gomod:binary:hash:SHA-256", Value: hex.EncodeToString(sum[:])}) {
				t.Errorf("the SBOM's binary hash is not the SHA-256 of %s beside it", filepath.Join(filepath.Dir(path), "portcullis"))
			}
			if !slices.Contains(props, property{Name: "cdx:gomod:build:tag", Value: "grpcnotrace"}) {
				t.Errorf("the SBOM does not record the grpcnotrace build tag: %v", props)
			}
		})
	}
}
