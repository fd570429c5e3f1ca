package chartschema

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// docs reads the doc comments of struct fields from the module's source.
type docs struct {
	root, module string
	pkgs         map[string]*source // package path → what its source declares
	names        map[reflect.Type]*wordReplacer
	full         bool // describe returns whole doc comments, not first sentences
	err          error
}

// source is what docs reads from the Go files of one package: the doc
// comments of struct fields, the constants (for the doc links that name
// them) and the imports (for the links qualified by a package name).
type source struct {
	path    string
	fields  map[string]string     // "Type.Field" → doc
	consts  map[string]constSpec  // name → declaration
	imports map[string]string     // name in the files → import path
	values  map[string]constValue // name → value, once evaluated
}

func newDocs(root string) (*docs, error) {
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("chartschema: %w", err)
	}
	for line := range strings.Lines(string(mod)) {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return &docs{root: root, module: strings.Trim(strings.TrimSpace(m), `"`), pkgs: map[string]*source{}, names: map[reflect.Type]*wordReplacer{}}, nil
		}
	}
	return nil, fmt.Errorf("chartschema: %s/go.mod names no module", root)
}

// pkg returns what the source of the package at path, a package of the
// module, declares. Its _test.go files are read too, for the types tests
// declare; an external test package (name_test) is not.
func (d *docs) pkg(pkgPath string) (*source, error) {
	if src, ok := d.pkgs[pkgPath]; ok {
		return src, nil
	}
	rel, ok := strings.CutPrefix(pkgPath, d.module)
	if !ok {
		return nil, fmt.Errorf("chartschema: package %s is not in module %s, whose source is read for descriptions", pkgPath, d.module)
	}
	dir := filepath.Join(d.root, filepath.FromSlash(rel))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("chartschema: %w", err)
	}
	src := &source{path: pkgPath, fields: map[string]string{}, consts: map[string]constSpec{}, imports: map[string]string{}, values: map[string]constValue{}}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("chartschema: %w", err)
		}
		if strings.HasSuffix(f.Name.Name, "_test") {
			continue // an external test package, whose types are not the package's
		}
		src.read(f)
	}
	d.pkgs[pkgPath] = src
	return src, nil
}

// read adds what the file f declares to src.
func (src *source) read(f *ast.File) {
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := path.Base(p)
		if strings.HasPrefix(name, "v") && strings.Trim(name[1:], "0123456789") == "" && path.Dir(p) != "." {
			name = path.Base(path.Dir(p)) // example.com/redis/v9 is package redis
		}
		if imp.Name != nil {
			name = imp.Name.Name
		}
		src.imports[name] = p
	}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range gd.Specs {
			switch spec := spec.(type) {
			case *ast.ValueSpec:
				if gd.Tok != token.CONST {
					continue
				}
				for i, n := range spec.Names {
					c := constSpec{typ: spec.Type}
					if i < len(spec.Values) {
						c.expr = spec.Values[i]
					}
					src.consts[n.Name] = c
				}
			case *ast.TypeSpec:
				st, ok := spec.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, fl := range st.Fields.List {
					for _, n := range fl.Names {
						src.fields[spec.Name.Name+"."+n.Name] = fl.Doc.Text()
					}
				}
			}
		}
	}
}

// constSpec is the declaration of one constant.
type constSpec struct {
	typ  ast.Expr // the declared type, or nil
	expr ast.Expr // the value, or nil (an iota repetition, which is not read)
}

// constValue is a constant's value, and whether it is a [time.Duration].
type constValue struct {
	v        constant.Value
	duration bool
}

// wordReplacer replaces Go field names, as whole words, by their keys. It
// leaves alone a name in a doc link ("see [Policy]", the type) and an
// all-capitals name past the start ("the MCP endpoint", "an RFC 6570 URI
// template"), which is more likely the word than the field.
type wordReplacer struct {
	re    *regexp.Regexp // nil: no words
	words map[string]string
}

func (r *wordReplacer) Replace(s string) string {
	if r.re == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range r.re.FindAllStringIndex(s, -1) {
		word := s[m[0]:m[1]]
		inLink := m[0] > 0 && s[m[0]-1] == '[' && m[1] < len(s) && s[m[1]] == ']'
		if inLink || (m[0] > 0 && word == strings.ToUpper(word)) {
			continue
		}
		b.WriteString(s[last:m[0]])
		b.WriteString(r.words[word])
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}
