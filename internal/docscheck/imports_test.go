package docscheck

import (
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"maps"
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

// The headers of the two tables of docs/architecture.md that importMap
// reads.
const (
	packageHeader    = "| package | job | may import |"
	thirdPartyHeader = "| third-party module | only in |"
)

// importMap is what docs/architecture.md says about imports. Packages are
// folders relative to the module root, "." for the root.
type importMap struct {
	row     map[string]int      // package → its row in the package table, from 0 at the top
	allowed map[string][]string // package → the packages of this module it may import
	modules []string            // third-party module paths, in the order of their table
	onlyIn  map[string][]string // third-party module path → the packages that may import it
}

// parseImportMap reads the package table of docs/architecture.md (whose
// order is the direction of imports: down), which must have minRows rows
// at least, and its table of third-party modules and the packages that
// alone may import them.
func parseImportMap(md string, minRows int) (*importMap, error) {
	code := regexp.MustCompile("`([^`]+)`")
	m := &importMap{row: map[string]int{}, allowed: map[string][]string{}, onlyIn: map[string][]string{}}
	var errs []error
	table, rows := "", 0
	for line := range strings.Lines(md) {
		line = strings.TrimSpace(line)
		switch {
		case line == packageHeader || line == thirdPartyHeader:
			table = line
			continue
		case table == "" || strings.HasPrefix(line, "|---"):
			continue
		case !strings.HasPrefix(line, "|"):
			table = ""
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		var named [][]string // the code spans of each cell
		for _, c := range cells {
			var names []string
			for _, s := range code.FindAllStringSubmatch(c, -1) {
				names = append(names, folderOf(s[1]))
			}
			named = append(named, names)
		}
		switch table {
		case packageHeader:
			if len(cells) != 3 {
				errs = append(errs, fmt.Errorf("a package row has %d cells, want 3: %s", len(cells), line))
				continue
			}
			for _, p := range named[0] {
				m.row[p] = rows
				m.allowed[p] = named[2]
			}
			rows++
		case thirdPartyHeader:
			if len(cells) != 2 || len(named[0]) != 1 {
				errs = append(errs, fmt.Errorf("a third-party row wants 2 cells, the first naming one module: %s", line))
				continue
			}
			mod := strings.TrimSuffix(named[0][0], "/")
			m.modules = append(m.modules, mod)
			m.onlyIn[mod] = named[1]
		}
	}
	if rows < minRows {
		errs = append(errs, fmt.Errorf("read %d package rows, want them all: is the table's header still %q?", rows, packageHeader))
	}
	if len(m.modules) == 0 {
		errs = append(errs, fmt.Errorf("read no third-party rows: is the table's header still %q?", thirdPartyHeader))
	}
	return m, errors.Join(errs...)
}

// folderOf turns a package as the tables name it into its folder.
func folderOf(name string) string {
	if strings.HasPrefix(name, "portcullis") {
		return "."
	}
	return name
}

// check returns every way imports (package → the import paths of its
// non-test files, this module's as folders) break the map:
//
//   - a package has no row, or a row names a package that does not exist;
//   - a row allows a package that has no row, or one in its own row or
//     above it: imports flow down the table;
//   - a package imports a package of this module its row does not allow;
//   - a package imports a third-party module the third-party table keeps
//     to other packages, or the table names a package that does not
//     import the module (a claim no longer true).
func (m *importMap) check(imports map[string][]string) []string {
	var problems []string
	for _, pkg := range slices.Sorted(maps.Keys(m.row)) {
		if _, ok := imports[pkg]; !ok {
			problems = append(problems, fmt.Sprintf("the package table names %s, which does not exist", show(pkg)))
		}
		for _, dep := range m.allowed[pkg] {
			r, ok := m.row[dep]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s may import %s, which has no row", show(pkg), show(dep)))
			case r <= m.row[pkg]:
				problems = append(problems, fmt.Sprintf("%s may import %s, which is not below it in the package table: imports flow down", show(pkg), show(dep)))
			}
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(imports)) {
		allowed, ok := m.allowed[pkg]
		if !ok {
			problems = append(problems, fmt.Sprintf("package %s has no row in the package table", show(pkg)))
		}
		for _, imp := range imports[pkg] {
			if !isThirdParty(imp) {
				if ok && !slices.Contains(allowed, imp) {
					problems = append(problems, fmt.Sprintf("%s imports %s, which its row does not allow", show(pkg), show(imp)))
				}
				continue
			}
			for _, mod := range m.modules {
				if under(imp, mod) && !slices.Contains(m.onlyIn[mod], pkg) {
					problems = append(problems, fmt.Sprintf("%s imports %s, which the third-party table keeps to %s", show(pkg), imp, showAll(m.onlyIn[mod])))
				}
			}
		}
	}
	for _, mod := range m.modules {
		for _, pkg := range m.onlyIn[mod] {
			if !slices.ContainsFunc(imports[pkg], func(imp string) bool { return under(imp, mod) }) {
				problems = append(problems, fmt.Sprintf("the third-party table says %s imports %s, which it does not", show(pkg), mod))
			}
		}
	}
	return problems
}

// show names the package in folder p for a message.
func show(p string) string {
	if p == "." {
		return "portcullis (root)"
	}
	return p
}

// showAll names the packages in folders ps for a message.
func showAll(ps []string) string {
	var names []string
	for _, p := range ps {
		names = append(names, show(p))
	}
	return strings.Join(names, ", ")
}

// isThirdParty reports whether imp, an import path or a folder of this
// module, is a third-party module's: its first element has a dot.
func isThirdParty(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return strings.Contains(first, ".") && imp != "."
}

// under reports whether the import path imp is mod or a package under it.
func under(imp, mod string) bool {
	return imp == mod || strings.HasPrefix(imp, mod+"/")
}

// TestImportRules checks every package of the module against the tables
// of docs/architecture.md (see importMap.check). A change that moves
// something updates the map or fails here.
func TestImportRules(t *testing.T) {
	md, err := os.ReadFile(architecturePath)
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseImportMap(string(md), 10)
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	imports := moduleImports(t)
	if len(imports) < 10 {
		t.Fatalf("found %d packages, want them all: is the module root still %s?", len(imports), root)
	}
	for _, p := range m.check(imports) {
		t.Errorf("docs/architecture.md: %s", p)
	}
}

// TestImportMapCheck shows that check finds each kind of break, planted
// in a small map and in the imports of a small module.
func TestImportMapCheck(t *testing.T) {
	const md = `
| package | job | may import |
|---|---|---|
| ` + "`cmd/server`" + ` | the binary | ` + "`portcullis`" + ` |
| ` + "`portcullis` (root)" + ` | the program | ` + "`auth`, `tasks`, `internal/leaf`" + ` |
| ` + "`auth`" + ` | auth | ` + "`internal/leaf`" + ` |
| ` + "`tasks`" + ` | tasks | — |
| ` + "`internal/leaf`, `internal/other`" + ` | helpers | — |

Prose between the tables.

| third-party module | only in |
|---|---|
| ` + "`github.com/prometheus`" + ` (Prometheus) | ` + "`portcullis`" + ` (root) |
| ` + "`go.opentelemetry.io/`" + ` | ` + "`tasks`" + ` |
`
	clean := map[string][]string{
		"cmd/server":     {"."},
		".":              {"auth", "tasks", "github.com/prometheus/client_golang/prometheus", "golang.org/x/oauth2"},
		"auth":           {"internal/leaf"},
		"tasks":          {"go.opentelemetry.io/otel/trace"},
		"internal/leaf":  nil,
		"internal/other": nil,
	}
	// with returns clean changed by edit.
	with := func(edit func(map[string][]string)) map[string][]string {
		imports := map[string][]string{}
		for k, v := range clean {
			imports[k] = slices.Clone(v)
		}
		edit(imports)
		return imports
	}
	for _, tt := range []struct {
		name    string
		md      string // replaces a line of md: old => new
		imports map[string][]string
		want    []string
	}{
		{name: "clean", imports: clean},
		{name: "an import its row does not allow", imports: with(func(m map[string][]string) { m["auth"] = append(m["auth"], "tasks") }),
			want: []string{"auth imports tasks, which its row does not allow"}},
		{name: "an allowed import up the table", md: "| auth | `internal/leaf` | => | auth | `internal/leaf`, `portcullis` |",
			want: []string{"auth may import portcullis (root), which is not below it in the package table: imports flow down"}},
		{name: "an allowed import in the same row", md: "| helpers | — | => | helpers | `internal/other` |",
			want: []string{"internal/leaf may import internal/other, which is not below it in the package table: imports flow down", "internal/other may import internal/other, which is not below it in the package table: imports flow down"}},
		{name: "an allowed import without a row", md: "| tasks | — | => | tasks | `internal/gone` |",
			want: []string{"tasks may import internal/gone, which has no row"}},
		{name: "a package without a row", imports: with(func(m map[string][]string) { m["internal/new"] = nil }),
			want: []string{"package internal/new has no row in the package table"}},
		{name: "a row without a package", imports: with(func(m map[string][]string) { delete(m, "internal/other") }),
			want: []string{"the package table names internal/other, which does not exist"}},
		{name: "Prometheus outside its packages", imports: with(func(m map[string][]string) {
			m["auth"] = append(m["auth"], "github.com/prometheus/client_golang/prometheus/promauto")
		}),
			want: []string{"auth imports github.com/prometheus/client_golang/prometheus/promauto, which the third-party table keeps to portcullis (root)"}},
		{name: "OpenTelemetry outside its packages", imports: with(func(m map[string][]string) {
			m["internal/leaf"] = []string{"go.opentelemetry.io/otel"}
		}),
			want: []string{"internal/leaf imports go.opentelemetry.io/otel, which the third-party table keeps to tasks"}},
		{name: "a module path that only starts the same", imports: with(func(m map[string][]string) {
			m["auth"] = append(m["auth"], "github.com/prometheus-community/pro-bing")
		})},
		{name: "a third-party claim no longer true", imports: with(func(m map[string][]string) { m["tasks"] = nil }),
			want: []string{"the third-party table says tasks imports go.opentelemetry.io, which it does not"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			text := md
			if tt.md != "" {
				old, new, _ := strings.Cut(tt.md, " => ")
				if !strings.Contains(text, old) {
					t.Fatalf("the planted map has no %q", old)
				}
				text = strings.Replace(text, old, new, 1)
			}
			imports := tt.imports
			if imports == nil {
				imports = clean
			}
			m, err := parseImportMap(text, 1)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.check(imports); !slices.Equal(got, tt.want) {
				t.Errorf("check =\n  %q\nwant\n  %q", got, tt.want)
			}
		})
	}
}

// TestParseImportMap shows that parseImportMap refuses tables it cannot
// read, rather than reading them as allowing nothing or everything.
func TestParseImportMap(t *testing.T) {
	for _, tt := range []struct {
		name, md, wantErr string
	}{
		{name: "no tables", md: "# Architecture\n", wantErr: "read 0 package rows"},
		{name: "a package row of two cells", md: packageHeader + "\n|---|---|---|\n| `auth` | auth |\n", wantErr: "a package row has 2 cells"},
		{name: "no third-party rows", md: packageHeader + "\n|---|---|---|\n| `auth` | auth | — |\n", wantErr: "read no third-party rows"},
		{name: "a third-party row naming two modules", md: thirdPartyHeader + "\n|---|---|\n| `a.io/x`, `b.io/y` | `auth` |\n", wantErr: "the first naming one module"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseImportMap(tt.md, 1); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseImportMap: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// moduleImports returns, for each package folder of the module (tests
// aside), what its non-test files import: this module's packages as
// folders ("." for the root), third-party packages as import paths, the
// standard library not at all.
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
			switch dep, ok := strings.CutPrefix(p, module+"/"); {
			case ok:
				p = dep
			case p == module:
				p = "."
			case !isThirdParty(p):
				continue // the standard library
			}
			if !slices.Contains(out[pkg], p) {
				out[pkg] = append(out[pkg], p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
