package curation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/portcullis-mcp/portcullis/internal/mcpname"
)

// Check reports every problem of v that can be found without the
// catalog, each keyed relative to the view: a selection without a
// source, a malformed pattern, curation of a pattern rather than one
// item, an exposed name that is not a valid tool or prompt name, an
// argument both fixed and described, a value that is not JSON.
func (v *View) Check() []Problem {
	var ps []Problem
	for i := range v.Tools {
		ps = append(ps, v.Tools[i].check(fmt.Sprintf("tools[%d]", i))...)
	}
	for i, s := range v.Resources {
		key := fmt.Sprintf("resources[%d]", i)
		ps = append(ps, checkSelection(key, s.Source, "uri", s.URI, s.Single(), curatedFields{
			"expose_as": s.ExposeAs != "", "title": s.Title != "", "description": s.Description != "",
		})...)
	}
	for i, s := range v.Prompts {
		key := fmt.Sprintf("prompts[%d]", i)
		ps = append(ps, checkSelection(key, s.Source, "name", s.Name, s.Single(), curatedFields{
			"expose_as": s.ExposeAs != "", "title": s.Title != "", "description": s.Description != "",
		})...)
		if s.ExposeAs != "" && !mcpname.Valid(s.ExposeAs) {
			ps = append(ps, problemf(key+".expose_as", "%q is not a valid prompt name: 1 to %d letters, digits, '_', '-' or '.'", s.ExposeAs, mcpname.MaxLen))
		}
	}
	return ps
}

// curatedFields says which curation keys a selection sets.
type curatedFields map[string]bool

// checkSelection checks what every selection has: a source, a well-formed
// pattern (under the key field), and curation only of a single item.
func checkSelection(key, source, field, pattern string, single bool, curated curatedFields) []Problem {
	var ps []Problem
	if source == "" {
		ps = append(ps, problemf(key+".source", "missing: name a built-in toolset, %q or an upstream", SourceProgram))
	}
	if _, err := path.Match(pattern, ""); err != nil {
		ps = append(ps, problemf(key+"."+field, "%q is not a valid pattern: %v", pattern, err))
	}
	if !single {
		for _, k := range sortedKeys(curated) {
			if curated[k] {
				what := fmt.Sprintf("the pattern %q", pattern)
				if pattern == "" {
					what = "every item of the source"
				}
				ps = append(ps, problemf(key+"."+k, "curation applies to one item, and %s %s selects any number: give the exact %s", field, what, field))
			}
		}
	}
	return ps
}

func (s *ToolSelection) check(key string) []Problem {
	ps := checkSelection(key, s.Source, "name", s.Name, s.Single(), curatedFields{
		"expose_as": s.ExposeAs != "", "title": s.Title != "", "description": s.Description != "",
		"annotations": s.Annotations != nil, "arguments": len(s.Arguments) > 0, "fixed_arguments": len(s.FixedArguments) > 0,
	})
	if s.ExposeAs != "" && !mcpname.Valid(s.ExposeAs) {
		ps = append(ps, problemf(key+".expose_as", "%q is not a valid tool name: 1 to %d letters, digits, '_', '-' or '.'", s.ExposeAs, mcpname.MaxLen))
	}
	for _, name := range sortedKeys(s.FixedArguments) {
		if _, err := jsonValue(s.FixedArguments[name]); err != nil {
			ps = append(ps, problemf(key+".fixed_arguments."+name, "%v", err))
		}
	}
	for _, name := range sortedKeys(s.Arguments) {
		if _, fixed := s.FixedArguments[name]; fixed {
			ps = append(ps, problemf(key+".arguments."+name, "the argument is also fixed (fixed_arguments.%s): callers never see a fixed argument, so it takes no description or default", name))
			continue
		}
		if d := s.Arguments[name].Default; d != nil {
			if _, err := jsonValue(d); err != nil {
				ps = append(ps, problemf(key+".arguments."+name+".default", "%v", err))
			}
		}
	}
	return ps
}

// CheckSchema reports every problem of the curation s against the input
// schema of the tool it selects, each keyed relative to the selection
// ("fixed_arguments.region"): a fixed or described argument that is not
// among the schema's properties, a fixed value or default that the
// argument's schema refuses. A value that cannot be checked (its schema
// refers outside itself and the schema's $defs) is a warning.
func (s *ToolSelection) CheckSchema(schema any) []Problem {
	if len(s.FixedArguments) == 0 && len(s.Arguments) == 0 {
		return nil
	}
	raw, ok := schema.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(schema); err != nil {
			return []Problem{problemf("name", "the tool's input schema cannot be read: %v", err)}
		}
	}
	root, err := parseObject(raw)
	if err != nil {
		return []Problem{problemf("name", "the tool's input schema cannot be read: %v", err)}
	}
	props := object{}
	if praw, ok := root.get("properties"); ok {
		if props, err = parseObject(praw); err != nil {
			return []Problem{problemf("name", "the tool's input schema cannot be read: properties: %v", err)}
		}
	}
	var names []string
	for _, m := range props {
		names = append(names, m.key)
	}
	has := func(key, arg string) (json.RawMessage, *Problem) {
		p, ok := props.get(arg)
		if !ok {
			known := "it takes no arguments"
			if len(names) > 0 {
				known = "it takes " + strings.Join(names, ", ")
			}
			pr := problemf(key, "the tool has no argument %q (%s)", arg, known)
			return nil, &pr
		}
		return p, nil
	}
	var ps []Problem
	check := func(key string, prop json.RawMessage, v any, what string) {
		if err := checkValue(root, prop, v); err != nil {
			pr := problemf(key, "the argument's schema refuses the %s %s: %v", what, shortJSON(v), err)
			if _, unchecked := err.(uncheckedError); unchecked {
				pr = problemf(key, "the %s %s cannot be checked: %v", what, shortJSON(v), err)
				pr.Warning = true
			}
			ps = append(ps, pr)
		}
	}
	for _, name := range sortedKeys(s.FixedArguments) {
		key := "fixed_arguments." + name
		prop, pr := has(key, name)
		if pr != nil {
			ps = append(ps, *pr)
			continue
		}
		check(key, prop, s.FixedArguments[name], "value")
	}
	for _, name := range sortedKeys(s.Arguments) {
		key := "arguments." + name
		prop, pr := has(key, name)
		if pr != nil {
			ps = append(ps, *pr)
			continue
		}
		if d := s.Arguments[name].Default; d != nil {
			check(key+".default", prop, d, "default")
		}
	}
	return ps
}

// uncheckedError says why a value could not be checked.
type uncheckedError struct{ err error }

func (e uncheckedError) Error() string { return e.err.Error() }

// checkValue validates v against the property schema prop of the schema
// root, with root's definitions, so that local references resolve.
func checkValue(root object, prop json.RawMessage, v any) error {
	inst, err := jsonValue(v)
	if err != nil {
		return err
	}
	switch string(bytes.TrimSpace(prop)) {
	case "true":
		return nil
	case "false":
		return fmt.Errorf("the argument's schema is false: it allows no value")
	}
	doc, err := parseObject(prop)
	if err != nil {
		return uncheckedError{err}
	}
	for _, k := range []string{"$schema", "$defs", "definitions"} {
		if d, ok := root.get(k); ok {
			if _, own := doc.get(k); !own {
				doc.set(k, d)
			}
		}
	}
	var sch jsonschema.Schema
	if err := json.Unmarshal(doc.encode(), &sch); err != nil {
		return uncheckedError{err}
	}
	resolved, err := sch.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		return uncheckedError{err}
	}
	var instance any
	if err := json.Unmarshal(inst, &instance); err != nil {
		return err
	}
	return resolved.Validate(instance)
}

// shortJSON is v as JSON, cut to a length that fits in a message.
func shortJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}
