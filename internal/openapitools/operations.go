package openapitools

import (
	"fmt"
	"mime"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Bounds of the texts a tool takes from its operation, in runes.
const (
	maxTitle       = 200
	maxDescription = 4096
)

// Where a Param goes in the request.
const (
	InPath   = "path"
	InQuery  = "query"
	InHeader = "header"
	InBody   = "body"
)

// What an Operation's body is sent as.
const (
	BodyJSON = "json" // the arguments of the body, as a JSON document
	BodyForm = "form" // application/x-www-form-urlencoded
)

// Operation is one operation of a document, as a tool serves it.
type Operation struct {
	// Name is the tool's name: the operationId, cleaned to ASCII letters,
	// digits, '_' and '-' and cut to MaxNameLen, or the method and path
	// ("get_pets_petId") when there is none. Names are unique among the
	// operations one call of Operations returns.
	Name string
	// Title is the operation's summary, Description its description (or
	// its summary when it has none), trimmed and bounded.
	Title, Description string
	// Method is the HTTP method ("GET"), Path the path template as the
	// document writes it ("/pets/{petId}"), without the server's URL.
	Method, Path string
	// InputSchema is a JSON Schema 2020-12 object schema, self-contained
	// (no $ref), with a property for each Param and
	// additionalProperties false.
	InputSchema map[string]any
	// OutputSchema is the schema of the first 2xx response's JSON body
	// when it is an object, as MCP output schemas must be; nil otherwise.
	OutputSchema map[string]any
	// Params says where each argument goes, in the order path, query,
	// header, body.
	Params []Param
	// Body is BodyJSON, BodyForm, or "" when the operation sends no body.
	Body string
	// ContentType is the media type the body is sent as
	// ("application/json", "application/merge-patch+json",
	// "application/x-www-form-urlencoded"), "" when Body is "".
	ContentType string
	// Annotations are the hints the method implies.
	Annotations Annotations
}

// Param is an argument of an Operation and where its value goes.
type Param struct {
	// Name is the argument's name: the parameter's or body property's
	// name, its characters other than ASCII letters, digits, '_', '-' and
	// '.' replaced by '_', and renamed if another argument has it (a
	// Problem says so).
	Name string
	// In is InPath, InQuery, InHeader or InBody.
	In string
	// As is the name on the wire: the parameter's name, or the body
	// property's; "" for an argument that is the whole body.
	As string
	// Required is whether a call must give the argument. A body property
	// is required when the body is and its schema requires the property.
	Required bool
	// Style and Explode are how a path, query or header parameter's value
	// is serialized, as the document says or by OpenAPI's defaults
	// ("simple" for path and header, "form" for query; Explode true for
	// "form"). They are "" and false for the body.
	Style   string
	Explode bool
}

// Annotations are MCP tool annotations. A nil field is not set, and
// takes MCP's default.
type Annotations struct {
	ReadOnly, Destructive, Idempotent *bool
}

// annotationsFor returns what the method says of an operation: GET, HEAD
// and OPTIONS only read, PUT and DELETE are idempotent, DELETE destroys.
// POST and PATCH say nothing, so MCP's defaults (may destroy, not
// idempotent) apply.
func annotationsFor(method string) Annotations {
	yes := func() *bool { t := true; return &t }
	switch method {
	case "GET", "HEAD", "OPTIONS":
		return Annotations{ReadOnly: yes()}
	case "PUT":
		return Annotations{Idempotent: yes()}
	case "DELETE":
		return Annotations{Idempotent: yes(), Destructive: yes()}
	}
	return Annotations{}
}

// Operations returns the operations sel selects, in the order of their
// paths and then of methods (GET, PUT, POST, DELETE, OPTIONS, HEAD,
// PATCH, TRACE), and the problems met: entries of sel that match nothing,
// operations left out (a required cookie parameter, a required body that
// is neither JSON nor a form) and the parts of the others that are left
// out or changed. The zero Selection selects nothing. Webhooks are not
// operations a client calls, and are not returned.
func (d *Document) Operations(sel Selection) ([]Operation, []Problem) {
	if sel.IsZero() || d.doc.Paths == nil {
		return nil, nil
	}
	s := newSelector(sel)
	items := d.doc.Paths.Map()
	paths := make([]string, 0, len(items))
	for p := range items {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var (
		ops      []Operation
		problems []Problem
		names    = map[string]bool{}
	)
	for _, p := range paths {
		item := items[p]
		for _, m := range methods {
			op := item.GetOperation(m)
			if op == nil || !s.match(op.OperationID, op.Tags, p, m) {
				continue
			}
			o, msgs, ok := d.operation(p, m, item, op)
			if ok {
				if n := unique(o.Name, func(n string) bool { return names[n] }); n != o.Name {
					msgs = append(msgs, fmt.Sprintf("the tool name %q is another operation's: this one is %q", o.Name, n))
					o.Name = n
				}
				names[o.Name] = true
				ops = append(ops, o)
			}
			for _, msg := range msgs {
				problems = append(problems, Problem{Operation: m + " " + p, Message: msg})
			}
		}
	}
	return ops, append(s.unused(), problems...)
}

// operation converts one operation. It returns false when the operation
// cannot be served; the messages say why, and what was left out or
// changed.
func (d *Document) operation(path, method string, item *openapi3.PathItem, op *openapi3.Operation) (Operation, []string, bool) {
	o := Operation{
		Name:        toolName(op.OperationID, method, path),
		Title:       bounded(op.Summary, maxTitle),
		Method:      method,
		Path:        path,
		Annotations: annotationsFor(method),
	}
	var msgs []string
	if op.OperationID != "" && o.Name != op.OperationID {
		msgs = append(msgs, fmt.Sprintf("operationId %q is the tool name %q", op.OperationID, o.Name))
	}
	if op.Description != "" {
		o.Description = bounded(op.Description, maxDescription)
	} else {
		o.Description = bounded(op.Summary, maxDescription)
	}

	in := inputs{conv: newConverter(d.openapi30(), request), props: map[string]any{}}
	if !in.parameters(append(slices.Clone(item.Parameters), op.Parameters...)) {
		return o, append(msgs, in.msgs...), false
	}
	for _, name := range templateNames(path) {
		if !slices.ContainsFunc(in.params, func(p Param) bool { return p.In == InPath && p.As == name }) {
			return o, append(msgs, append(in.msgs, fmt.Sprintf("path parameter %q is not declared: the operation is not served", name))...), false
		}
	}
	if op.RequestBody != nil && op.RequestBody.Value != nil {
		if !in.body(op.RequestBody.Value, &o) {
			return o, append(msgs, in.msgs...), false
		}
	}
	o.Params = in.params
	o.InputSchema = map[string]any{"type": "object", "properties": in.props, "additionalProperties": false}
	if len(in.required) > 0 {
		o.InputSchema["required"] = in.required
	}
	msgs = append(msgs, in.msgs...)
	msgs = append(msgs, in.conv.problems...)

	out := newConverter(d.openapi30(), response)
	o.OutputSchema = output(op, out)
	for _, p := range out.problems {
		msgs = append(msgs, "response "+p)
	}
	return o, msgs, true
}

// inputs gathers an operation's arguments.
type inputs struct {
	conv     *converter
	props    map[string]any
	required []string
	params   []Param
	msgs     []string
}

func (in *inputs) taken(name string) bool {
	_, ok := in.props[name]
	return ok
}

func (in *inputs) add(p Param, schema map[string]any) {
	in.props[p.Name] = schema
	if p.Required {
		in.required = append(in.required, p.Name)
	}
	in.params = append(in.params, p)
}

// parameters adds the path item's and operation's parameters (the
// operation's replacing the path item's of the same name and location),
// path first, then query, then header. It returns false when one cannot
// be sent: a required cookie parameter, or a required one described by
// content rather than a schema.
func (in *inputs) parameters(refs openapi3.Parameters) bool {
	var params []*openapi3.Parameter
	for _, r := range refs {
		if r == nil || r.Value == nil {
			continue
		}
		p := r.Value
		if i := slices.IndexFunc(params, func(q *openapi3.Parameter) bool { return q.In == p.In && q.Name == p.Name }); i >= 0 {
			params[i] = p
		} else {
			params = append(params, p)
		}
	}
	for _, where := range []string{InPath, InQuery, InHeader, "cookie"} {
		for _, p := range params {
			if p.In != where {
				continue
			}
			required := p.Required || where == InPath
			if where == "cookie" || p.Schema == nil {
				why := "cookie parameters cannot be sent"
				if where != "cookie" {
					why = "it is described by content, not a schema"
				}
				if required {
					in.msgs = append(in.msgs, fmt.Sprintf("required %s parameter %q: %s; the operation is not served", where, p.Name, why))
					return false
				}
				in.msgs = append(in.msgs, fmt.Sprintf("%s parameter %q is left out: %s", where, p.Name, why))
				continue
			}
			s := clone(in.conv.schema(p.Schema, where+" "+p.Name, 0))
			if p.Description != "" {
				s["description"] = bounded(p.Description, maxSchemaText)
			}
			if p.Deprecated {
				s["deprecated"] = true
			}
			if p.Example != nil {
				if _, ok := s["examples"]; !ok {
					s["examples"] = []any{p.Example}
				}
			}
			name := in.name(argName(p.Name), where)
			if name != p.Name {
				in.msgs = append(in.msgs, fmt.Sprintf("%s parameter %q is the argument %q", where, p.Name, name))
			}
			style := p.Style
			if style == "" {
				style = "simple"
				if where == InQuery {
					style = "form"
				}
			}
			explode := style == "form"
			if p.Explode != nil {
				explode = *p.Explode
			}
			in.add(Param{Name: name, In: where, As: p.Name, Required: required, Style: style, Explode: explode}, s)
		}
	}
	return true
}

// name returns name, or when another argument has it, name prefixed with
// where it goes ("query_id", "body_id") and made unique.
func (in *inputs) name(name, where string) string {
	if !in.taken(name) {
		return name
	}
	return unique(argName(where+"_"+name), in.taken)
}

// body adds the request body's arguments: each property of an object
// body, or one "body" argument for any other. It returns false when a
// required body cannot be sent: its media types are neither JSON nor a
// form, or a form's schema is not an object.
func (in *inputs) body(rb *openapi3.RequestBody, o *Operation) bool {
	ct, kind := bodyMediaType(rb.Content)
	if kind == "" {
		types := make([]string, 0, len(rb.Content))
		for t := range rb.Content {
			types = append(types, t)
		}
		sort.Strings(types)
		return in.refuseBody(rb, fmt.Sprintf("its media types (%s) are neither JSON nor a form", strings.Join(types, ", ")))
	}
	var s map[string]any
	if mt := rb.Content[ct]; mt != nil {
		s = in.conv.schema(mt.Schema, "body", 0)
	} else {
		s = map[string]any{}
	}
	props := objectProperties(s)
	if props == nil && kind == BodyForm {
		return in.refuseBody(rb, "its form is not described as an object")
	}
	o.Body, o.ContentType = kind, ct
	if props == nil {
		if rb.Description != "" {
			s = clone(s)
			s["description"] = bounded(rb.Description, maxSchemaText)
		}
		name := in.name("body", InBody)
		if name != "body" {
			in.msgs = append(in.msgs, fmt.Sprintf("the request body is the argument %q", name))
		}
		in.add(Param{Name: name, In: InBody, Required: rb.Required}, s)
		return true
	}
	required, _ := s["required"].([]string)
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		name := in.name(argName(n), InBody)
		if name != n {
			in.msgs = append(in.msgs, fmt.Sprintf("body property %q is the argument %q", n, name))
		}
		in.add(Param{Name: name, In: InBody, As: n, Required: rb.Required && slices.Contains(required, n)}, props[n].(map[string]any))
	}
	return true
}

func (in *inputs) refuseBody(rb *openapi3.RequestBody, why string) bool {
	if rb.Required {
		in.msgs = append(in.msgs, "the request body cannot be sent: "+why+"; the operation is not served")
		return false
	}
	in.msgs = append(in.msgs, "the optional request body is left out: "+why)
	return true
}

// bodyMediaType returns the media type a body is sent as, and BodyJSON
// or BodyForm: application/json first, then another JSON type
// (application/merge-patch+json), then a form; "" when the content has
// none of them.
func bodyMediaType(content openapi3.Content) (string, string) {
	keys := make([]string, 0, len(content))
	for k := range content {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var other, form string
	for _, k := range keys {
		mt, _, err := mime.ParseMediaType(k)
		switch {
		case err != nil:
		case mt == "application/json":
			return k, BodyJSON
		case strings.HasSuffix(mt, "+json") && other == "":
			other = k
		case mt == "application/x-www-form-urlencoded" && form == "":
			form = k
		}
	}
	if other != "" {
		return other, BodyJSON
	}
	if form != "" {
		return form, BodyForm
	}
	return "", ""
}

// objectProperties returns the properties of a schema that is an object
// with properties and nothing else that constrains it as a whole (no
// combinator, no schema for additional properties), so that each property
// can be an argument; nil for any other schema.
func objectProperties(s map[string]any) map[string]any {
	if t, ok := s["type"]; ok && t != "object" {
		return nil
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf", "not", "if", "patternProperties", "propertyNames",
		"dependentRequired", "dependentSchemas", "unevaluatedProperties", "minProperties", "maxProperties"} {
		if _, ok := s[k]; ok {
			return nil
		}
	}
	if ap, ok := s["additionalProperties"]; ok {
		if _, isBool := ap.(bool); !isBool {
			return nil
		}
	}
	props, _ := s["properties"].(map[string]any)
	if len(props) == 0 {
		return nil
	}
	return props
}

// output returns the output schema of an operation: the first 2xx
// response's JSON body schema, when it is an object.
func output(op *openapi3.Operation, conv *converter) map[string]any {
	if op.Responses == nil {
		return nil
	}
	responses := op.Responses.Map()
	codes := make([]string, 0, len(responses))
	for code := range responses {
		if len(code) == 3 && code[0] == '2' {
			codes = append(codes, code)
		}
	}
	// "200" < "201" < "2XX": a range comes after the codes it covers.
	sort.Strings(codes)
	for _, code := range codes {
		r := responses[code]
		if r == nil || r.Value == nil {
			continue
		}
		ct, kind := bodyMediaType(r.Value.Content)
		if kind != BodyJSON || r.Value.Content[ct].Schema == nil {
			return nil
		}
		s := conv.schema(r.Value.Content[ct].Schema, "body", 0)
		if _, ok := s["type"]; !ok && objectProperties(s) != nil {
			s = clone(s)
			s["type"] = "object"
		}
		if s["type"] != "object" {
			return nil
		}
		return s
	}
	return nil
}

// templateNames returns the names of a path template's {parameters}.
func templateNames(path string) []string {
	var names []string
	for {
		i := strings.IndexByte(path, '{')
		if i < 0 {
			return names
		}
		j := strings.IndexByte(path[i:], '}')
		if j < 0 {
			return names
		}
		names = append(names, path[i+1:i+j])
		path = path[i+j+1:]
	}
}
