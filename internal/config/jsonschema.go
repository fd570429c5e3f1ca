package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Patterns the JSON Schema gives to strings.
const (
	// DurationPattern matches what [time.ParseDuration] accepts, without a
	// sign: a negative duration is meaningless for a timeout or interval,
	// and every duration key's validation refuses one.
	DurationPattern = `^(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`
	// URLPattern is the pattern of a field tagged `schema:"url"`: empty, or
	// an http or https URL.
	URLPattern = `^(https?://.*)?$`
	// OriginPattern is the pattern of a field tagged `schema:"origin"`: a
	// browser origin, scheme://host[:port] with no path.
	OriginPattern = `^https?://[^/]+$`
)

// SchemaOptions tunes [JSONSchema]. A nil *SchemaOptions means no
// descriptions.
type SchemaOptions struct {
	// Describe returns the description of the key that field, declared in
	// struct type owner, sets; key is the key's name (the last element of
	// its path). An empty string means none. Nil means no descriptions.
	Describe func(owner reflect.Type, field reflect.StructField, key string) string
}

// JSONSchema returns a JSON Schema of the YAML document that [Load] accepts
// for the struct type of dst (a struct or a pointer to one), built by the
// same rules: keys come from yaml tags (inline structs flattened, `yaml:"-"`
// skipped), pointers are followed, every struct is an object with
// additionalProperties false, and a slice is an array of its elements
// (objects for a slice of structs), a map an object whose
// additionalProperties are its values, and a [json.RawMessage] any JSON
// value (the empty schema). Scalars map to JSON types: strings and
// types whose pointer implements [encoding.TextUnmarshaler] to string,
// [time.Duration] to a string matching [DurationPattern], bool to boolean,
// integers to integer (unsigned ones with minimum 0), floats to number.
//
// A field's `schema` tag adds what the Go type cannot say, as
// comma-separated options:
//
//	enum=a|b|c  the string (or each string of a list) is one of a, b, c
//	url         the string (or each one) matches [URLPattern]
//	origin      the string (or each one) matches [OriginPattern]
//	min=N       the number is at least N
//	unique      the list holds no duplicates
//	required    the key must be present, and a string must not be empty
//
// The schema constrains the file only; [Load] does not read the tag, so
// validation in Go must check the same rules. An unknown option, an option
// on a type it does not fit, or a struct type [Load] cannot configure is an
// error.
func JSONSchema(dst any, opts *SchemaOptions) (*jsonschema.Schema, error) {
	t := reflect.TypeOf(dst)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("config: JSONSchema needs a struct or a pointer to one, got %T", dst)
	}
	s := newSchema(t, "")
	if len(s.problems) > 0 {
		return nil, join(s.problems)
	}
	if opts == nil {
		opts = &SchemaOptions{}
	}
	g := &schemaGen{s: s, opts: opts, stack: map[reflect.Type]bool{}}
	out := g.object(t, "")
	return out, errors.Join(g.errs...)
}

// SchemaEnum returns the values of the enum option of field's `schema` tag
// (nil without one), for tests that hold it against the values the code
// accepts.
func SchemaEnum(field reflect.StructField) []string {
	for opt := range strings.SplitSeq(field.Tag.Get("schema"), ",") {
		if values, ok := strings.CutPrefix(opt, "enum="); ok {
			return strings.Split(values, "|")
		}
	}
	return nil
}

type schemaGen struct {
	s     *schema
	opts  *SchemaOptions
	stack map[reflect.Type]bool
	errs  []error
}

func (g *schemaGen) fail(path, format string, args ...any) {
	g.errs = append(g.errs, fmt.Errorf("config: %s: "+format, append([]any{path}, args...)...))
}

// object returns the schema of struct type t found at path.
func (g *schemaGen) object(t reflect.Type, path string) *jsonschema.Schema {
	o := &jsonschema.Schema{
		Type:                 "object",
		Properties:           map[string]*jsonschema.Schema{},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}, // false
	}
	if g.stack[t] {
		// Load allows a struct to contain itself through a slice; the schema
		// would be infinite without $ref, which nothing needs yet.
		g.fail(path, "type %s contains itself, which JSONSchema does not support", t)
		return o
	}
	g.stack[t] = true
	defer delete(g.stack, t)
	for _, f := range g.s.structFields(t, path) {
		key := joinPath(path, f.name)
		p := g.value(f.typ, key)
		required := g.applyTag(p, f.sf.Tag.Get("schema"), key)
		if g.opts.Describe != nil {
			p.Description = g.opts.Describe(f.owner, f.sf, f.name)
		}
		o.Properties[f.name] = p
		o.PropertyOrder = append(o.PropertyOrder, f.name)
		if required {
			o.Required = append(o.Required, f.name)
		}
	}
	return o
}

// value returns the schema of a value of type t at path.
func (g *schemaGen) value(t reflect.Type, path string) *jsonschema.Schema {
	t = deref(t)
	switch {
	case t == rawJSONType:
		return &jsonschema.Schema{} // any JSON value
	case isScalar(t):
		return scalarSchema(t)
	case t.Kind() == reflect.Map:
		return &jsonschema.Schema{Type: "object", AdditionalProperties: g.value(t.Elem(), path+"."+MapKey)}
	case t.Kind() == reflect.Slice:
		et := deref(t.Elem())
		if isScalar(et) {
			return &jsonschema.Schema{Type: "array", Items: scalarSchema(et)}
		}
		return &jsonschema.Schema{Type: "array", Items: g.object(et, path+"[]")}
	default: // a struct: newSchema has refused every other kind
		return g.object(t, path)
	}
}

func scalarSchema(t reflect.Type) *jsonschema.Schema {
	switch {
	case t == durationType:
		return &jsonschema.Schema{Type: "string", Pattern: DurationPattern}
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		return &jsonschema.Schema{Type: "string"}
	}
	switch t.Kind() {
	case reflect.Bool:
		return &jsonschema.Schema{Type: "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &jsonschema.Schema{Type: "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return &jsonschema.Schema{Type: "integer", Minimum: new(0.0)}
	case reflect.Float32, reflect.Float64:
		return &jsonschema.Schema{Type: "number"}
	}
	return &jsonschema.Schema{Type: "string"}
}

// applyTag applies the options of a `schema` tag to p, the schema of the
// key at path, and reports whether the key is required.
func (g *schemaGen) applyTag(p *jsonschema.Schema, tag, path string) (required bool) {
	if tag == "" {
		return false
	}
	// Options about strings apply to the items of a list of strings.
	str := p
	if p.Type == "array" {
		str = p.Items
	}
	isString := str.Type == "string" && str.Pattern == ""
	for opt := range strings.SplitSeq(tag, ",") {
		name, arg, _ := strings.Cut(opt, "=")
		switch name {
		case "enum", "url", "origin":
			if !isString {
				g.fail(path, "schema option %q needs a string or a list of strings", name)
				continue
			}
			switch name {
			case "enum":
				for v := range strings.SplitSeq(arg, "|") {
					str.Enum = append(str.Enum, v)
				}
			case "url":
				str.Pattern = URLPattern
			case "origin":
				str.Pattern = OriginPattern
			}
		case "min":
			n, err := strconv.ParseFloat(arg, 64)
			if err != nil || p.Type != "integer" && p.Type != "number" {
				g.fail(path, "schema option %q needs a number and a numeric key", opt)
				continue
			}
			p.Minimum = &n
		case "unique":
			if p.Type != "array" {
				g.fail(path, "schema option %q needs a list", opt)
				continue
			}
			p.UniqueItems = true
		case "required":
			required = true
			if p.Type == "string" {
				p.MinLength = new(1)
			}
		default:
			g.fail(path, "unknown schema option %q", opt)
		}
	}
	return required
}
