package docscheck

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	module           = "github.com/portcullis-mcp/portcullis"
	architecturePath = root + "/docs/architecture.md"
)

// outsideTheMap are the folders whose Go code is not part of the server:
// end-to-end tests, benchmarks and their peers, build scripts, examples
// with modules of their own.
var outsideTheMap = []string{"e2e", "bench", "scripts", "examples", ".cache", "helm", "deploy", "patches"}

// importRules reads the package table of docs/architecture.md: for each
// package (a folder relative to the module root, "." for the root), the
// packages of this module it may import.
func importRules(t *testing.T) map[string][]string {
	t.Helper()
	md, err := os.ReadFile(architecturePath)
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([^`]+)`")
	rules := map[string][]string{}
	inTable := false
	for line := range strings.Lines(string(md)) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "| package | job | may import |"):
			inTable = true
			continue
		case !inTable || strings.HasPrefix(line, "|---"):
			continue
		case !strings.HasPrefix(line, "|"):
			inTable = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("architecture.md: a package row has %d cells, want 3: %s", len(cells), line)
		}
		var allowed []string
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			allowed = append(allowed, folderOf(m[1]))
		}
		for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
			name := m[1]
			if strings.HasPrefix(name, "portcullis") {
				name = "."
			}
			rules[name] = allowed
		}
	}
	if len(rules) < 10 {
		t.Fatalf("architecture.md: read %d package rows, want them all: is the table's header still \"| package | job | may import |\"?", len(rules))
	}
	return rules
}

// folderOf turns a package as the table names it into its folder.
func folderOf(name string) string {
	if name == "portcullis" {
		return "."
	}
	return name
}

// TestImportRules checks every package of the module against the table of
// docs/architecture.md: each package has a row, and imports only the
// packages of this module that its row names. A change that moves
// something updates the map or fails here.
func TestImportRules(t *testing.T) {
	rules := importRules(t)
	imports := moduleImports(t)
	if len(imports) < 10 {
		t.Fatalf("found %d packages, want them all: is the module root still %s?", len(imports), root)
	}
	for pkg, deps := range imports {
		allowed, ok := rules[pkg]
		if !ok {
			t.Errorf("package %s has no row in docs/architecture.md's package table", pkg)
			continue
		}
		for _, d := range deps {
			if !slices.Contains(allowed, d) {
				t.Errorf("%s imports %s, which its row in docs/architecture.md does not allow", pkg, d)
			}
		}
	}
	for pkg := range rules {
		if _, ok := imports[pkg]; !ok {
			t.Errorf("docs/architecture.md names package %s, which does not exist", pkg)
		}
	}
}

// moduleImports returns, for each package folder of the module (tests
// aside), the packages of this module its non-test files import.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || slices.Contains(outsideTheMap, rel) || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			dep, ok := strings.CutPrefix(p, module+"/")
			if p == module {
				dep, ok = ".", true
			}
			if ok && !slices.Contains(out[pkg], dep) {
				out[pkg] = append(out[pkg], dep)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
