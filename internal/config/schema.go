package config

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Key is one settable key: its dotted path and its environment variable.
type Key struct {
	// Path is the dotted key path, such as "server.listen".
	Path string
	// Env is the environment variable that sets the key, such as
	// "PORTCULLIS_SERVER_LISTEN". It is empty for a key that can be set only
	// in the file (a slice of structs, a map, a JSON value).
	Env string
}

// Keys returns every settable key path of the struct type of dst (dotted,
// e.g. "server.listen") and the environment variable name for each (prefix +
// path upper-cased with '.' → '_'), in field order, for docs and tests. dst
// may be a struct or a pointer to one; for anything else Keys returns nil.
// Slices of structs, maps and JSON values are not settable from the
// environment (only from the file) and are listed without a variable; the
// keys inside their elements are not listed.
func Keys(dst any, prefix string) []Key {
	t := reflect.TypeOf(dst)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	return newSchema(t, prefix).keys
}

// envName returns the environment variable for a key path.
func envName(prefix, path string) string {
	b := []byte(strings.ToUpper(path))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return prefix + string(b)
}

// leaf is a key that can be set from the environment.
type leaf struct {
	path  string
	index [][]int // field indexes from the root, one per struct level; pointers are followed between levels
	typ   reflect.Type
}

// schema is what Load knows about the struct type of dst.
type schema struct {
	prefix   string
	keys     []Key
	env      map[string]leaf   // variable name → key
	fileOnly map[string]string // variable name → path of a key that only the file can set
	fields   map[reflect.Type][]field
	problems []*Problem // programming errors in the struct type
	stack    map[reflect.Type]bool
}

func newSchema(t reflect.Type, prefix string) *schema {
	s := &schema{
		prefix:   prefix,
		env:      map[string]leaf{},
		fileOnly: map[string]string{},
		fields:   map[reflect.Type][]field{},
		stack:    map[reflect.Type]bool{},
	}
	s.walkStruct(t, "", nil, true)
	return s
}

func (s *schema) problem(path string, format string, args ...any) {
	s.problems = append(s.problems, &Problem{Key: path, Err: fmt.Errorf("config: "+format, args...)})
}

// walkStruct records the keys of struct type t found at path. keyed is false
// under a slice, where keys are checked but not listed.
func (s *schema) walkStruct(t reflect.Type, path string, index [][]int, keyed bool) {
	if s.stack[t] {
		if keyed {
			s.problem(path, "type %s contains itself, which only a slice may do", t)
		}
		return
	}
	s.stack[t] = true
	defer delete(s.stack, t)
	for _, f := range s.structFields(t, path) {
		s.walkField(f.typ, joinPath(path, f.name), append(index[:len(index):len(index)], f.index), keyed)
	}
}

func (s *schema) walkField(t reflect.Type, path string, index [][]int, keyed bool) {
	bt := deref(t)
	switch {
	case bt == rawJSONType:
		s.addFileOnly(path, keyed)
	case isScalar(bt):
		s.addKey(path, index, t, keyed)
	case bt.Kind() == reflect.Slice:
		et := deref(bt.Elem())
		switch {
		case isScalar(et):
			s.addKey(path, index, t, keyed)
		case et.Kind() == reflect.Struct:
			s.addFileOnly(path, keyed)
			s.walkStruct(et, path+"[]", nil, false)
		default:
			s.problem(path, "unsupported field type %s: list elements must be scalars or structs", t)
		}
	case bt.Kind() == reflect.Map:
		et := deref(bt.Elem())
		switch {
		case bt.Key().Kind() != reflect.String:
			s.problem(path, "unsupported field type %s: a mapping's keys must be strings", t)
		case et == rawJSONType || isScalar(et):
			s.addFileOnly(path, keyed)
		case et.Kind() == reflect.Struct:
			s.addFileOnly(path, keyed)
			s.walkStruct(et, path+"."+MapKey, nil, false)
		default:
			s.problem(path, "unsupported field type %s: a mapping's values must be scalars, structs or JSON values", t)
		}
	case bt.Kind() == reflect.Struct:
		s.walkStruct(bt, path, index, keyed)
	default:
		s.problem(path, "unsupported field type %s", t)
	}
}

// addFileOnly records the key at path, which only the file can set (a
// list of mappings, a mapping of names, a JSON value).
func (s *schema) addFileOnly(path string, keyed bool) {
	if keyed {
		s.keys = append(s.keys, Key{Path: path})
		s.fileOnly[envName(s.prefix, path)] = path
	}
}

func (s *schema) addKey(path string, index [][]int, t reflect.Type, keyed bool) {
	if !keyed {
		return
	}
	name := envName(s.prefix, path)
	if other, ok := s.env[name]; ok {
		s.problem(path, "keys %s and %s both map to environment variable %s; rename one", other.path, path, name)
		return
	}
	s.env[name] = leaf{path: path, index: index, typ: t}
	s.keys = append(s.keys, Key{Path: path, Env: name})
}

// field is one key of a struct: a field, or a field of an inlined struct.
type field struct {
	name  string
	index []int // for reflect.Value.FieldByIndex
	typ   reflect.Type
	sf    reflect.StructField
	owner reflect.Type // the struct that declares sf: t, or an inlined struct
}

// structFields returns the keys of struct type t, and records problems with
// its tags at path.
func (s *schema) structFields(t reflect.Type, path string) []field {
	if fs, ok := s.fields[t]; ok {
		return fs
	}
	var fields []field
	seen := map[string]bool{}
	var collect func(t reflect.Type, index []int)
	collect = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			idx := append(index[:len(index):len(index)], i)
			if _, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ","); sf.IsExported() && hasOption(opts, "inline") {
				if sf.Type.Kind() != reflect.Struct {
					s.problem(joinPath(path, sf.Name), "inline field %s must be a struct, not %s", sf.Name, sf.Type)
					continue
				}
				collect(sf.Type, idx)
				continue
			}
			name := FieldKey(sf)
			if name == "" {
				continue
			}
			if seen[name] {
				s.problem(joinPath(path, name), "key %q is defined twice in %s", name, t)
				continue
			}
			seen[name] = true
			fields = append(fields, field{name: name, index: idx, typ: sf.Type, sf: sf, owner: t})
		}
	}
	collect(t, nil)
	s.fields[t] = fields
	return fields
}

// FieldKey returns the name of the key that struct field f sets: its yaml
// tag's name, or its Go name lower-cased when the tag gives none. It
// returns "" for a field that sets no key of its own: one that is
// unexported, tagged `yaml:"-"`, or inlined (its fields are keys of the
// struct that holds it).
func FieldKey(f reflect.StructField) string {
	tag, hasTag := f.Tag.Lookup("yaml")
	name, opts, _ := strings.Cut(tag, ",")
	switch {
	case !f.IsExported() || name == "-" && opts == "" || hasOption(opts, "inline"):
		return ""
	case !hasTag || name == "":
		return strings.ToLower(f.Name)
	}
	return name
}

func hasOption(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

var (
	durationType        = reflect.TypeFor[time.Duration]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	rawJSONType         = reflect.TypeFor[json.RawMessage]()
)

// MapKey stands for the names of a mapping's entries in the key paths of
// what they hold, such as "tools.prompts.<name>.text", where a path to a
// list's elements has "[]".
const MapKey = "<name>"

// isScalar reports whether a value of non-pointer type t is written as one
// YAML scalar.
func isScalar(t reflect.Type) bool {
	if t == durationType || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}
