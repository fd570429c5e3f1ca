package docscheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The packages a change goes to most often stay small enough to change
// with confidence: no file of them over maxFileLines lines and no type
// with more than maxMethods methods (tests excepted). A change that would
// cross either line splits the file or the type by job.
const (
	maxFileLines = 500
	maxMethods   = 30
)

// sizedPackages are the folders, relative to the repository, held to the
// limits: the root package, mcp and upstream.
var sizedPackages = []string{".", "mcp", "upstream"}

func TestFileAndTypeSizes(t *testing.T) {
	for _, dir := range sizedPackages {
		problems, err := sizeProblems(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", dir, p)
		}
	}
}

// sizeProblems lists the non-test Go files of dir over maxFileLines lines
// and the types declared there with more than maxMethods methods.
func sizeProblems(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var problems []string
	methods := map[string]int{}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if n := strings.Count(string(src), "\n"); n > maxFileLines {
			problems = append(problems, fmt.Sprintf("%s has %d lines, more than %d", name, n, maxFileLines))
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && len(fd.Recv.List) == 1 {
				if recv := receiverType(fd.Recv.List[0].Type); recv != "" {
					methods[recv]++
				}
			}
		}
	}
	var types []string
	for typ, n := range methods {
		if n > maxMethods {
			types = append(types, fmt.Sprintf("type %s has %d methods, more than %d", typ, n, maxMethods))
		}
	}
	slices.Sort(types)
	return append(problems, types...), nil
}

// receiverType is the name of a method's receiver type: T for T, *T,
// T[P] and *T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// TestSizeProblems: sizeProblems finds a long file and a type with too many
// methods (on value and pointer receivers, generic too), and passes what
// is within the limits and test files.
func TestSizeProblems(t *testing.T) {
	var many strings.Builder
	many.WriteString("package p\n\ntype big[T any] struct{}\n")
	for i := range maxMethods + 1 {
		recv := "big[T]"
		if i%2 == 0 {
			recv = "*big[T]"
		}
		fmt.Fprintf(&many, "func (%s) m%d() {}\n", recv, i)
	}
	var within strings.Builder
	within.WriteString("package p\n\ntype small struct{}\n")
	for i := range maxMethods {
		fmt.Fprintf(&within, "func (small) m%d() {}\n", i)
	}
	long := "package p\n" + strings.Repeat("\n", maxFileLines)
	for _, tt := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{name: "within the limits", files: map[string]string{"a.go": within.String(), "b.go": "package p\n" + strings.Repeat("\n", maxFileLines-1)}},
		{name: "a long file", files: map[string]string{"a.go": long}, want: []string{fmt.Sprintf("a.go has %d lines, more than %d", maxFileLines+1, maxFileLines)}},
		{name: "a long test file", files: map[string]string{"a_test.go": long}},
		{name: "a type with too many methods", files: map[string]string{"a.go": many.String()}, want: []string{fmt.Sprintf("type big has %d methods, more than %d", maxMethods+1, maxMethods)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, src := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := sizeProblems(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("sizeProblems = %q, want %q", got, tt.want)
			}
		})
	}
}
