package openapitools

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/getkin/kin-openapi/openapi3"
)

// Limits of a converted schema. A schema that refers to itself (a tree's
// node and its children) is expanded maxRecursion times on each path and
// then cut; maxDepth and maxNodes bound what references can multiply
// without recursion (a schema referring twice to one referring twice to
// …), so that no document makes a schema of unbounded size.
const (
	maxRecursion   = 2
	maxDepth       = 32
	maxNodes       = 10000
	maxSchemaText  = 1024 // runes of a schema's description or title
	cutDescription = "Not described further: the schema is recursive or too deep."
)

// direction is which way a schema's values travel: a request's leave out
// readOnly properties, a response's writeOnly ones, as OpenAPI has them.
type direction int

const (
	request direction = iota
	response
)

// converter turns OpenAPI schemas into self-contained JSON Schema 2020-12
// ones, for one operation: every $ref inlined, allOf merged, oneOf written
// as anyOf, OpenAPI 3.0's nullable and example written as 3.1's type list
// and examples, and the OpenAPI-only keywords (discriminator, xml,
// externalDocs, extensions) left out.
type converter struct {
	openapi30 bool
	dir       direction
	onPath    map[*openapi3.Schema]int // how often each schema is being converted on the current path
	nodes     int
	problems  []string
}

func newConverter(openapi30 bool, dir direction) *converter {
	return &converter{openapi30: openapi30, dir: dir, onPath: map[*openapi3.Schema]int{}}
}

func (c *converter) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !slices.Contains(c.problems, msg) {
		c.problems = append(c.problems, msg)
	}
}

// schema returns the JSON Schema of ref, at is where it is (for problems:
// "body.owner.friends").
func (c *converter) schema(ref *openapi3.SchemaRef, at string, depth int) map[string]any {
	if ref == nil {
		return map[string]any{}
	}
	s := ref.Value
	if s == nil {
		c.problem("%s: reference %q is not resolved; any value is accepted", at, ref.Ref)
		return map[string]any{}
	}
	if s.Always != nil {
		if *s.Always {
			return map[string]any{}
		}
		return map[string]any{"not": map[string]any{}}
	}
	if c.onPath[s] >= maxRecursion || depth > maxDepth || c.nodes >= maxNodes {
		c.problem("%s: the schema is recursive or too deep; it is cut there and accepts any value", at)
		return map[string]any{"description": cutDescription}
	}
	c.onPath[s]++
	defer func() { c.onPath[s]-- }()
	c.nodes++

	out := map[string]any{}
	nullable := c.openapi30 && s.Nullable
	if s.Type != nil && len(*s.Type) > 0 {
		types := slices.Clone([]string(*s.Type))
		if nullable && !slices.Contains(types, "null") {
			types = append(types, "null")
		}
		if len(types) == 1 {
			out["type"] = types[0]
		} else {
			out["type"] = types
		}
	}
	c.annotate(out, s)
	c.numbers(out, s)
	c.strings(out, s, at)
	c.arrays(out, s, at, depth)
	c.objects(out, s, at, depth)
	c.combinators(out, s, at, depth)
	if s.Enum != nil {
		enum := slices.Clone(s.Enum)
		if nullable && !slices.Contains(enum, nil) {
			enum = append(enum, nil)
		}
		out["enum"] = enum
	}
	if s.DynamicRef != "" {
		c.problem("%s: $dynamicRef %q is not followed; it accepts any value", at, s.DynamicRef)
	}
	if nullable && s.Type == nil && len(out) > 0 && s.Enum == nil {
		// nullable without a type: the schema, or null.
		return map[string]any{"anyOf": []any{out, map[string]any{"type": "null"}}}
	}
	return out
}

// annotate copies the keywords that describe a value.
func (c *converter) annotate(out map[string]any, s *openapi3.Schema) {
	if s.Title != "" {
		out["title"] = bounded(s.Title, maxSchemaText)
	}
	if s.Description != "" {
		out["description"] = bounded(s.Description, maxSchemaText)
	}
	if s.Format != "" {
		out["format"] = s.Format
	}
	if s.Default != nil {
		out["default"] = s.Default
	}
	if s.Const != nil {
		out["const"] = s.Const
	}
	var examples []any
	examples = append(examples, s.Examples...)
	if s.Example != nil {
		examples = append(examples, s.Example)
	}
	if len(examples) > 0 {
		out["examples"] = examples
	}
	if s.Deprecated {
		out["deprecated"] = true
	}
	if s.ReadOnly {
		out["readOnly"] = true
	}
	if s.WriteOnly {
		out["writeOnly"] = true
	}
	if s.ContentMediaType != "" {
		out["contentMediaType"] = s.ContentMediaType
	}
	if s.ContentEncoding != "" {
		out["contentEncoding"] = s.ContentEncoding
	}
}

func (c *converter) numbers(out map[string]any, s *openapi3.Schema) {
	if s.Min != nil {
		out["minimum"] = *s.Min
	}
	if s.Max != nil {
		out["maximum"] = *s.Max
	}
	if s.MultipleOf != nil {
		out["multipleOf"] = *s.MultipleOf
	}
	// OpenAPI 3.0's exclusiveMinimum is a flag on minimum; 3.1's the bound.
	if b := s.ExclusiveMin; b.Value != nil {
		out["exclusiveMinimum"] = *b.Value
	} else if b.IsTrue() && s.Min != nil {
		out["exclusiveMinimum"] = *s.Min
		delete(out, "minimum")
	}
	if b := s.ExclusiveMax; b.Value != nil {
		out["exclusiveMaximum"] = *b.Value
	} else if b.IsTrue() && s.Max != nil {
		out["exclusiveMaximum"] = *s.Max
		delete(out, "maximum")
	}
}

func (c *converter) strings(out map[string]any, s *openapi3.Schema, at string) {
	if s.MinLength > 0 {
		out["minLength"] = s.MinLength
	}
	if s.MaxLength != nil {
		out["maxLength"] = *s.MaxLength
	}
	if s.Pattern != "" {
		// Arguments are validated in Go: a pattern RE2 cannot compile
		// (a lookahead, a backreference) would fail every call.
		if _, err := regexp.Compile(s.Pattern); err != nil {
			c.problem("%s: pattern %q is left out: Go's regexp does not take it (%v)", at, s.Pattern, err)
		} else {
			out["pattern"] = s.Pattern
		}
	}
}

func (c *converter) arrays(out map[string]any, s *openapi3.Schema, at string, depth int) {
	if s.Items != nil {
		out["items"] = c.schema(s.Items, at+"[]", depth+1)
	}
	if len(s.PrefixItems) > 0 {
		out["prefixItems"] = c.list(s.PrefixItems, at+"[]", depth)
	}
	if s.Contains != nil {
		out["contains"] = c.schema(s.Contains, at+"[]", depth+1)
	}
	if s.MinContains != nil {
		out["minContains"] = *s.MinContains
	}
	if s.MaxContains != nil {
		out["maxContains"] = *s.MaxContains
	}
	if s.MinItems > 0 {
		out["minItems"] = s.MinItems
	}
	if s.MaxItems != nil {
		out["maxItems"] = *s.MaxItems
	}
	if s.UniqueItems {
		out["uniqueItems"] = true
	}
	if b := c.boolSchema(s.UnevaluatedItems, at+"[]", depth); b != nil {
		out["unevaluatedItems"] = b
	}
}

func (c *converter) objects(out map[string]any, s *openapi3.Schema, at string, depth int) {
	var skipped []string
	if len(s.Properties) > 0 {
		props := map[string]any{}
		for name, p := range s.Properties {
			if p != nil && p.Value != nil && ((c.dir == request && p.Value.ReadOnly) || (c.dir == response && p.Value.WriteOnly)) {
				skipped = append(skipped, name)
				continue
			}
			props[name] = c.schema(p, at+"."+name, depth+1)
		}
		out["properties"] = props
	}
	if len(s.Required) > 0 {
		var req []string
		for _, r := range s.Required {
			if !slices.Contains(skipped, r) && !slices.Contains(req, r) {
				req = append(req, r)
			}
		}
		if len(req) > 0 {
			out["required"] = req
		}
	}
	if b := c.boolSchema(s.AdditionalProperties, at+".*", depth); b != nil {
		out["additionalProperties"] = b
	}
	if len(s.PatternProperties) > 0 {
		out["patternProperties"] = c.schemas(s.PatternProperties, at+".*", depth)
	}
	if s.PropertyNames != nil {
		out["propertyNames"] = c.schema(s.PropertyNames, at+".*", depth+1)
	}
	if s.MinProps > 0 {
		out["minProperties"] = s.MinProps
	}
	if s.MaxProps != nil {
		out["maxProperties"] = *s.MaxProps
	}
	if len(s.DependentRequired) > 0 {
		dr := map[string]any{}
		for k, v := range s.DependentRequired {
			dr[k] = slices.Clone(v)
		}
		out["dependentRequired"] = dr
	}
	if len(s.DependentSchemas) > 0 {
		out["dependentSchemas"] = c.schemas(s.DependentSchemas, at, depth)
	}
	if b := c.boolSchema(s.UnevaluatedProperties, at+".*", depth); b != nil {
		out["unevaluatedProperties"] = b
	}
}

// combinators writes not, if/then/else, anyOf and oneOf (as anyOf: the
// clients of several model APIs refuse oneOf, and a value that matches
// two branches is the API's to refuse), then merges allOf in.
func (c *converter) combinators(out map[string]any, s *openapi3.Schema, at string, depth int) {
	if s.Not != nil {
		out["not"] = c.schema(s.Not, at, depth+1)
	}
	if s.If != nil {
		out["if"] = c.schema(s.If, at, depth+1)
		if s.Then != nil {
			out["then"] = c.schema(s.Then, at, depth+1)
		}
		if s.Else != nil {
			out["else"] = c.schema(s.Else, at, depth+1)
		}
	}
	var extra []any
	if len(s.AnyOf) > 0 {
		out["anyOf"] = c.list(s.AnyOf, at, depth)
	}
	if len(s.OneOf) > 0 {
		branches := c.list(s.OneOf, at, depth)
		if _, ok := out["anyOf"]; ok {
			extra = append(extra, map[string]any{"anyOf": branches})
		} else {
			out["anyOf"] = branches
		}
	}
	for _, sub := range s.AllOf {
		if left := mergeInto(out, c.schema(sub, at, depth+1)); len(left) > 0 {
			extra = append(extra, left)
		}
	}
	if len(extra) > 0 {
		out["allOf"] = append(allOfOf(out), extra...)
	}
}

func (c *converter) list(refs openapi3.SchemaRefs, at string, depth int) []any {
	out := make([]any, 0, len(refs))
	for _, r := range refs {
		out = append(out, c.schema(r, at, depth+1))
	}
	return out
}

func (c *converter) schemas(m openapi3.Schemas, at string, depth int) map[string]any {
	out := make(map[string]any, len(m))
	for k, r := range m {
		out[k] = c.schema(r, at, depth+1)
	}
	return out
}

// boolSchema returns a keyword that is a boolean or a schema, or nil when
// it is not set.
func (c *converter) boolSchema(b openapi3.BoolSchema, at string, depth int) any {
	if b.Schema != nil {
		return c.schema(b.Schema, at, depth+1)
	}
	if b.Has != nil {
		return *b.Has
	}
	return nil
}
