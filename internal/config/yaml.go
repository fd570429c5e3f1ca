package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// maxVisits bounds the nodes one document may expand to through aliases.
const maxVisits = 100_000

// decoder walks a YAML node tree against a struct type, recording a Problem
// for each thing that does not fit and decoding everything else.
type decoder struct {
	name     string // file name for Problem.Source
	schema   *schema
	problems []*Problem
	visits   int
}

func (d *decoder) problem(path string, line int, err error) {
	d.problems = append(d.problems, &Problem{Key: path, Source: d.name + ":" + strconv.Itoa(line), Err: err})
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document decodes the single YAML document in data into the struct v.
func (d *decoder) document(data []byte, v reflect.Value) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err != io.EOF {
			d.syntaxError(err)
		}
		return
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		d.problem("", next.Line, errors.New("the file holds more than one YAML document"))
		return
	case err != io.EOF:
		d.syntaxError(err)
		return
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return
	}
	root := doc.Content[0]
	if resolve(root).Kind != yaml.MappingNode && !isNull(resolve(root)) {
		d.problem("", root.Line, fmt.Errorf("the file must hold a mapping of keys, not %s", nodeDesc(resolve(root))))
		return
	}
	d.decode(root, v, "")
}

func (d *decoder) syntaxError(err error) {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		d.problem("", line, errors.New("invalid YAML: "+m[2]))
		return
	}
	d.problems = append(d.problems, &Problem{Source: d.name, Err: fmt.Errorf("invalid YAML: %w", err)})
}

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func nodeDesc(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "an empty document"
}

// visit counts a visit of node n, found at path, and reports whether the
// document may still be walked: past maxVisits (aliases expanding without
// end) it records the problem once and stops every walk.
func (d *decoder) visit(n *yaml.Node, path string) bool {
	if d.visits++; d.visits > maxVisits {
		if d.visits == maxVisits+1 {
			d.problem(path, n.Line, errors.New("the document expands to too many values through aliases"))
		}
		return false
	}
	return true
}

// decode stores node n into v, whose key path is path.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if !d.visit(n, path) {
		return
	}
	line := n.Line
	n = resolve(n)
	if v.Type() == rawJSONType {
		// A JSON value: null is a value like any other, not "keep the
		// default".
		var b bytes.Buffer
		before := len(d.problems)
		d.json(n, &b, path)
		if len(d.problems) == before {
			v.SetBytes(b.Bytes())
		}
		return
	}
	if isNull(n) {
		// An empty value keeps the default, except that it clears a pointer.
		if v.Kind() == reflect.Pointer {
			v.SetZero()
		}
		return
	}
	t := v.Type()
	switch {
	case t.Kind() == reflect.Pointer:
		// Decode into a copy so that a default shared with other structs
		// is never changed.
		p := reflect.New(t.Elem())
		if !v.IsNil() {
			p.Elem().Set(v.Elem())
		}
		d.decode(n, p.Elem(), path)
		v.Set(p)
	case isScalar(t):
		if n.Kind != yaml.ScalarNode {
			d.problem(path, line, fmt.Errorf("expected %s, got %s", describe(t), nodeDesc(n)))
			return
		}
		if err := setText(v, n.Value); err != nil {
			d.problem(path, line, err)
		}
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.problem(path, line, fmt.Errorf("expected a list of %s, got %s", plural(t.Elem()), nodeDesc(n)))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, e := range n.Content {
			d.decode(e, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.problem(path, line, fmt.Errorf("expected a mapping, got %s", nodeDesc(n)))
			return
		}
		d.mapping(n, v, path)
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.problem(path, line, fmt.Errorf("expected a mapping of names, got %s", nodeDesc(n)))
			return
		}
		m := reflect.MakeMapWithSize(t, len(n.Content)/2)
		d.pairs(n, path, func(key string, _ int, vn *yaml.Node) {
			e := reflect.New(t.Elem()).Elem()
			d.decode(vn, e, joinPath(path, key))
			m.SetMapIndex(reflect.ValueOf(key).Convert(t.Key()), e)
		})
		v.Set(m)
	}
}

// pairs calls f with each key of the mapping node n, found at path, its
// line and its value node, in order, after recording a problem for each
// key that is not a string, a merge key or a duplicate (which f never
// sees).
func (d *decoder) pairs(n *yaml.Node, path string, f func(key string, line int, v *yaml.Node)) {
	seen := map[string]int{} // key → line
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := resolve(n.Content[i]), n.Content[i+1]
		line := n.Content[i].Line
		if kn.Kind != yaml.ScalarNode {
			d.problem(path, line, fmt.Errorf("a key must be a string, not %s", nodeDesc(kn)))
			continue
		}
		key := kn.Value
		if kn.ShortTag() == "!!merge" {
			d.problem(path, line, errors.New("merge keys (<<) are not supported; write the keys out"))
			continue
		}
		if first, ok := seen[key]; ok {
			d.problem(joinPath(path, key), line, fmt.Errorf("duplicate key; first set on line %d", first))
			continue
		}
		seen[key] = line
		f(key, line, vn)
	}
}

// mapping decodes the mapping node n into the struct v.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	fields := d.schema.structFields(v.Type(), path)
	byName := make(map[string]field, len(fields))
	names := make([]string, len(fields))
	for i, f := range fields {
		byName[f.name] = f
		names[i] = f.name
	}
	d.pairs(n, path, func(key string, line int, vn *yaml.Node) {
		kpath := joinPath(path, key)
		f, ok := byName[key]
		if !ok {
			msg := "unknown key"
			if s := suggest(key, names); s != "" {
				msg += fmt.Sprintf("; did you mean %s?", joinPath(path, s))
			}
			d.problem(kpath, line, errors.New(msg))
			return
		}
		d.decode(vn, v.FieldByIndex(f.index), kpath)
	})
}

// json writes the YAML node n, found at path, to b as JSON, recording a
// problem for what JSON cannot hold. Keys are strings (a scalar key is
// taken as written); a number must be finite; a scalar JSON has no type
// for (a timestamp, binary data, a custom tag) is the string written, so
// that a date stays the text "2025-01-31".
func (d *decoder) json(n *yaml.Node, b *bytes.Buffer, path string) {
	if !d.visit(n, path) {
		return
	}
	line := n.Line
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		first := true
		d.pairs(n, path, func(key string, _ int, vn *yaml.Node) {
			if !first {
				b.WriteByte(',')
			}
			first = false
			k, _ := json.Marshal(key)
			b.Write(k)
			b.WriteByte(':')
			d.json(vn, b, joinPath(path, key))
		})
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			d.json(e, b, fmt.Sprintf("%s[%d]", path, i))
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		var v any = n.Value
		switch n.ShortTag() {
		case "!!null":
			v = nil
		case "!!bool", "!!int", "!!float":
			if err := n.Decode(&v); err != nil {
				d.problem(path, line, err)
				return
			}
		}
		out, err := json.Marshal(v)
		if err != nil {
			d.problem(path, line, fmt.Errorf("%s is not a JSON value (JSON has no infinity or NaN)", nodeDesc(n)))
			return
		}
		b.Write(out)
	default:
		d.problem(path, line, fmt.Errorf("expected a JSON value, got %s", nodeDesc(n)))
	}
}

func plural(t reflect.Type) string {
	t = deref(t)
	switch {
	case t.Kind() == reflect.Struct && !isScalar(t):
		return "mappings"
	case t.Kind() == reflect.String:
		return "strings"
	}
	return "values"
}
