package docscheck

import (
	"fmt"
	"go/types"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// Inside every package of the map (docs/architecture.md), files are
// layered by who uses whom: no file uses, directly or through others, a
// file that uses it. A file uses another when it names something declared
// there: a function, type, variable or constant, a method or a field (so
// a method declared beside the code it serves counts where its type is
// declared and where it is called). A reader can then read a package from
// the bottom up, and a change to a file touches only the files above it.
func TestFilesLayered(t *testing.T) {
	skip := func(pkgPath string) bool {
		dir := strings.TrimPrefix(strings.TrimPrefix(pkgPath, module), "/")
		return slices.ContainsFunc(outsideTheMap, func(out string) bool {
			return dir == out || strings.HasPrefix(dir, out+"/")
		})
	}
	problems, err := layerProblems(root, skip, "./...")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// layerProblems loads the packages patterns name from dir and returns, for
// each package but those skip reports, every circle of its non-test
// files: each file of the circle with the files of it that it uses and
// the names it uses there.
func layerProblems(dir string, skip func(pkgPath string) bool, patterns ...string) ([]string, error) {
	pkgs, err := packages.Load(&packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
		Dir:  dir,
	}, patterns...)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, p := range pkgs {
		if skip != nil && skip(p.PkgPath) {
			continue
		}
		if len(p.Errors) > 0 {
			return nil, fmt.Errorf("%s: %v", p.PkgPath, p.Errors[0])
		}
		uses := fileUses(p)
		for _, circle := range circles(uses) {
			var b strings.Builder
			fmt.Fprintf(&b, "%s: files use each other in a circle:", p.PkgPath)
			for _, from := range circle {
				for _, to := range slices.Sorted(maps.Keys(uses[from])) {
					if slices.Contains(circle, to) {
						fmt.Fprintf(&b, "\n\t%s uses %s: %s", from, to, strings.Join(uses[from][to], ", "))
					}
				}
			}
			problems = append(problems, b.String())
		}
	}
	return problems, nil
}

// fileUses maps each non-test file of p (by base name) to the other
// files of p it uses and, for each, the sorted names it uses there.
func fileUses(p *packages.Package) map[string]map[string][]string {
	uses := map[string]map[string][]string{}
	scope := p.Types.Scope()
	for id, obj := range p.TypesInfo.Uses {
		if obj == nil || obj.Pkg() != p.Types || !declaredInFile(obj, scope) {
			continue
		}
		from := filepath.Base(p.Fset.Position(id.Pos()).Filename)
		to := filepath.Base(p.Fset.Position(obj.Pos()).Filename)
		if from == to || strings.HasSuffix(from, "_test.go") {
			continue
		}
		if uses[from] == nil {
			uses[from] = map[string][]string{}
		}
		if names := uses[from][to]; !slices.Contains(names, obj.Name()) {
			uses[from][to] = append(names, obj.Name())
		}
	}
	for _, m := range uses {
		for _, names := range m {
			slices.Sort(names)
		}
	}
	return uses
}

// declaredInFile reports whether obj is declared at the top level of a
// file of its package (scope): a package-level name, a method, or a
// field; not a local variable, parameter or label.
func declaredInFile(obj types.Object, scope *types.Scope) bool {
	switch o := obj.(type) {
	case *types.Func:
		return true
	case *types.Var:
		return o.IsField() || o.Parent() == scope
	case *types.Label, *types.PkgName:
		return false
	default:
		return o.Parent() == scope
	}
}

// circles returns the strongly connected components of more than one
// file in the graph uses, each sorted, in a stable order.
func circles(uses map[string]map[string][]string) [][]string {
	var (
		index   = map[string]int{}
		low     = map[string]int{}
		onStack = map[string]bool{}
		stack   []string
		out     [][]string
	)
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range slices.Sorted(maps.Keys(uses[v])) {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var c []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			c = append(c, w)
			if w == v {
				break
			}
		}
		if len(c) > 1 {
			slices.Sort(c)
			out = append(out, c)
		}
	}
	for _, v := range slices.Sorted(maps.Keys(uses)) {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return out
}

// TestLayerProblems: layerProblems finds files that use each other
// through a function, a method (declared beside its caller's type), a
// field or a constant, directly or through a third file, and passes
// files used one way and test files.
func TestLayerProblems(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{
			name: "layered",
			files: map[string]string{
				"a.go":      "package p\n\nfunc A() int { return b() + c }\n",
				"b.go":      "package p\n\nfunc b() int { return c }\n",
				"c.go":      "package p\n\nconst c = 1\n",
				"a_test.go": "package p\n\nfunc useA() int { return A() }\n",
				"c_test.go": "package p\n\nfunc useAll() int { return A() + b() }\n",
			},
		},
		{
			name: "a method beside its caller",
			files: map[string]string{
				"t.go": "package p\n\ntype T struct{ n int }\n\nfunc (t *T) Run() int { return t.step() }\n",
				"s.go": "package p\n\nfunc (t *T) step() int { return t.n }\n",
			},
			want: []string{"p: files use each other in a circle:\n\ts.go uses t.go: T, n\n\tt.go uses s.go: step"},
		},
		{
			name: "through a third file",
			files: map[string]string{
				"a.go": "package p\n\nvar a = b\n",
				"b.go": "package p\n\nvar b = c\n",
				"c.go": "package p\n\nconst c = 1\n\nfunc f() int { return a }\n",
			},
			want: []string{"p: files use each other in a circle:\n\ta.go uses b.go: b\n\tb.go uses c.go: c\n\tc.go uses a.go: a"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.files["go.mod"] = "module p\n\ngo 1.24\n"
			for name, src := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := layerProblems(dir, nil, ".")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("layerProblems = %q, want %q", got, tt.want)
			}
		})
	}
}
