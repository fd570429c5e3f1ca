// Command sbom completes the CycloneDX SBOM that `cyclonedx-gomod bin`
// writes for the shipped binary with what the binary's build info cannot
// say: a patched module in it (the MCP Go SDK, fosite) is not the module
// it names but the module at the version go.mod requires, with the patches
// of patches/DIR applied (scripts/sdk-patch.sh builds it from a copy the
// generated go.mod replaces it with, so the build info records only that
// copy's path, "(devel)").
//
// It replaces that component by the module at its version, with its go.sum
// hash, a pedigree naming the released module as ancestor and each patch
// (its name and full diff) as an "unofficial" patch, and one property per
// patch. Everything else is left as the tool wrote it. It completes one
// module a run:
//
//	go run ./sbom -in raw.cdx.json -out sbom.cdx.json \
//	  -replaced ./.cache/sdk-patched/go-sdk -dir go-sdk \
//	  -module github.com/modelcontextprotocol/go-sdk -version v1.8.0 \
//	  -hash h1:… ../../patches/go-sdk/v1.8.0-*.patch
//
// scripts/sbom.sh runs it; make sbom writes the SBOMs of the image's
// binaries.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// patchProperty names the property that lists one patch of patches/dir
// applied ("portcullis:go-sdk:patch").
func patchProperty(dir string) string { return "portcullis:" + dir + ":patch" }

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "the SBOM cyclonedx-gomod wrote (JSON)")
	out := fs.String("out", "", "where to write the completed SBOM")
	replaced := fs.String("replaced", "", "the module path the binary's build info records for the patched module")
	dir := fs.String("dir", "go-sdk", "the folder of patches/ that holds the module's patches")
	module := fs.String("module", "github.com/modelcontextprotocol/go-sdk", "the patched module's path")
	version := fs.String("version", "", "the module version go.mod requires")
	hash := fs.String("hash", "", "the module's go.sum hash (h1:…)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *out == "" || *replaced == "" || *version == "" {
		return errors.New("sbom: -in, -out, -replaced and -version are required")
	}
	var patches []Patch
	for _, p := range fs.Args() {
		diff, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("sbom: %w", err)
		}
		name := strings.TrimPrefix(strings.TrimSuffix(filepath.Base(p), ".patch"), *version+"-")
		patches = append(patches, Patch{Name: name, Diff: string(diff)})
	}
	raw, err := os.ReadFile(*in)
	if err != nil {
		return fmt.Errorf("sbom: %w", err)
	}
	doc, err := Complete(raw, *replaced, Module{Path: *module, Version: *version, Hash: *hash}, *dir, patches)
	if err != nil {
		return err
	}
	return os.WriteFile(*out, doc, 0o644)
}

// Module is the released module the patched copy comes from.
type Module struct {
	Path, Version string
	Hash          string // go.sum's h1: hash of the module's files; may be empty
}

// Patch is one patch applied to the module: its name and unified diff.
type Patch struct {
	Name, Diff string
}

func purl(m Module) string { return "pkg:golang/" + m.Path + "@" + m.Version + "?type=module" }

// sha256Hex turns go.sum's "h1:BASE64" into a CycloneDX SHA-256 hash.
func sha256Hex(h1 string) (string, bool) {
	b64, ok := strings.CutPrefix(h1, "h1:")
	if !ok {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) != 32 {
		return "", false
	}
	return hex.EncodeToString(b), true
}

// Complete rewrites the SBOM doc: the one component named replaced
// becomes m with patches, those of patches/dir, as its pedigree, and every
// reference to it follows. It fails unless exactly one component is named
// replaced.
func Complete(doc []byte, replaced string, m Module, dir string, patches []Patch) ([]byte, error) {
	var bom map[string]any
	if err := json.Unmarshal(doc, &bom); err != nil {
		return nil, fmt.Errorf("sbom: %w", err)
	}
	if bom["bomFormat"] != "CycloneDX" {
		return nil, fmt.Errorf("sbom: not a CycloneDX document (bomFormat %v)", bom["bomFormat"])
	}
	components, _ := bom["components"].([]any)
	var found []map[string]any
	for _, c := range components {
		if c, ok := c.(map[string]any); ok && c["name"] == replaced {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("sbom: %d components named %q, want 1 (is the binary built with scripts/sdk-patch.sh's go.mod?)", len(found), replaced)
	}
	c := found[0]
	oldRef, _ := c["bom-ref"].(string)
	ref := purl(m) + "&patched=true"
	for k := range c {
		delete(c, k)
	}
	c["bom-ref"] = ref
	c["type"] = "library"
	c["name"] = m.Path
	c["version"] = m.Version
	c["scope"] = "required"
	c["purl"] = purl(m)
	c["description"] = fmt.Sprintf("%s %s with %d patches applied (patches/%s)", m.Path, m.Version, len(patches), dir)
	c["externalReferences"] = []any{map[string]any{"type": "vcs", "url": "https://" + m.Path}}
	ancestor := map[string]any{
		"bom-ref": purl(m),
		"type":    "library",
		"name":    m.Path,
		"version": m.Version,
		"purl":    purl(m),
	}
	if h, ok := sha256Hex(m.Hash); ok {
		ancestor["hashes"] = []any{map[string]any{"alg": "SHA-256", "content": h}}
	}
	var cdxPatches, props []any
	for _, p := range patches {
		cdxPatches = append(cdxPatches, map[string]any{
			"type": "unofficial",
			"diff": map[string]any{
				"text": map[string]any{"contentType": "text/x-diff", "content": p.Diff},
				"url":  "https://github.com/portcullis-mcp/portcullis/blob/main/patches/" + dir + "/" + m.Version + "-" + p.Name + ".patch",
			},
		})
		props = append(props, map[string]any{"name": patchProperty(dir), "value": p.Name})
	}
	pedigree := map[string]any{"ancestors": []any{ancestor}}
	if len(cdxPatches) > 0 {
		pedigree["patches"] = cdxPatches
		pedigree["notes"] = "Built from the released module with these patches applied by scripts/sdk-patch.sh; patches/README.md says why each exists and when it goes away."
		c["properties"] = props
	}
	c["pedigree"] = pedigree

	// References: the dependency graph and any compositions.
	if oldRef != "" {
		replaceRefs(bom, oldRef, ref)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(bom); err != nil {
		return nil, fmt.Errorf("sbom: %w", err)
	}
	return buf.Bytes(), nil
}

// replaceRefs replaces the string old by new wherever it is a whole value
// under the document's dependencies and compositions.
func replaceRefs(bom map[string]any, old, new string) {
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				v[k] = walk(e)
			}
		case []any:
			for i, e := range v {
				v[i] = walk(e)
			}
		case string:
			if v == old {
				return new
			}
		}
		return v
	}
	for _, k := range []string{"dependencies", "compositions"} {
		if v, ok := bom[k]; ok {
			bom[k] = walk(v)
		}
	}
}
