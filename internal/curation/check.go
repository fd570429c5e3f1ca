package curation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/portcullis-mcp/portcullis/internal/mcpname"
)

// Sources are what the selections of an exposure may name as their
// source (see [Exposure.Check]).
type Sources struct {
	// Toolsets are the built-in toolsets' names, and Enabled those the
	// configuration enables: a selection may name only an enabled one.
	Toolsets, Enabled []string
	// Upstreams are the upstreams by name, each with the function that
	// returns the name its tool or prompt called name has on the root
	// server (with the upstream's prefix).
	Upstreams map[string]func(name string) string
}

// Check reports every problem of e that can be found without the
// catalog, each keyed relative to e ("tools[0].fixed_arguments.region"):
// a source that src does not have; a malformed pattern; curation of a
// pattern rather than of one item; an exposed name that is not a valid
// tool or prompt name, or that two selections expose; an argument
// without a name, both described and fixed, or described with nothing;
// two fixed arguments, or two with a default, whose names differ only in
// letter case; a value that is not JSON. Whether a selected item exists,
// has the arguments curated and accepts their values is
// [ToolSelection.CheckSchema]'s and package catalog's, once the catalog
// is built.
func (e *Exposure) Check(src Sources) []Problem {
	var ps []Problem
	at := func(key, format string, args ...any) { ps = append(ps, problemf(key, format, args...)) }
	exposed := map[string]string{} // a single tool's exposed name → its key
	for j := range e.Tools {
		t := &e.Tools[j]
		k := fmt.Sprintf("tools[%d]", j)
		tat := func(key, format string, args ...any) { at(k+"."+key, format, args...) }
		rootName, ok := src.check(t.Source, tat)
		if err := checkPattern(t.Name); err != nil {
			tat("name", "%v", err)
			continue
		}
		if !t.Single() {
			for _, key := range t.curated() {
				tat(key, "applies to one tool, but name %q is a pattern", t.Name)
			}
			continue
		}
		if t.ExposeAs != "" && !mcpname.Valid(t.ExposeAs) {
			tat("expose_as", "%q must be 1 to %d letters, digits, '_', '-' or '.'", t.ExposeAs, mcpname.MaxLen)
		}
		t.checkArguments(tat)
		if ok {
			noteExposed(exposed, exposedName(t.ExposeAs, t.Name, rootName), k, t.ExposeAs != "", tat, "tool")
		}
	}
	for j := range e.Resources {
		r := &e.Resources[j]
		k := fmt.Sprintf("resources[%d]", j)
		rat := func(key, format string, args ...any) { at(k+"."+key, format, args...) }
		src.check(r.Source, rat)
		if err := checkPattern(r.URI); err != nil {
			rat("uri", "%v", err)
			continue
		}
		if !r.Single() {
			for _, key := range curated(r.ExposeAs, r.Title, r.Description) {
				rat(key, "applies to one resource, but uri %q is a pattern", r.URI)
			}
			continue
		}
		if r.ExposeAs != "" && strings.TrimSpace(r.ExposeAs) == "" {
			rat("expose_as", "must not be blank")
		}
	}
	exposed = map[string]string{}
	for j := range e.Prompts {
		p := &e.Prompts[j]
		k := fmt.Sprintf("prompts[%d]", j)
		pat := func(key, format string, args ...any) { at(k+"."+key, format, args...) }
		rootName, ok := src.check(p.Source, pat)
		if err := checkPattern(p.Name); err != nil {
			pat("name", "%v", err)
			continue
		}
		if !p.Single() {
			for _, key := range curated(p.ExposeAs, p.Title, p.Description) {
				pat(key, "applies to one prompt, but name %q is a pattern", p.Name)
			}
			continue
		}
		if p.ExposeAs != "" && !mcpname.Valid(p.ExposeAs) {
			pat("expose_as", "%q must be 1 to %d letters, digits, '_', '-' or '.'", p.ExposeAs, mcpname.MaxLen)
		}
		if ok {
			noteExposed(exposed, exposedName(p.ExposeAs, p.Name, rootName), k, p.ExposeAs != "", pat, "prompt")
		}
	}
	return ps
}

// check reports what is wrong with source, at the selection's key
// "source". It returns, for an upstream, the function that names its
// items on the root server, and whether source is valid.
func (s Sources) check(source string, at func(key, format string, args ...any)) (rootName func(string) string, ok bool) {
	rootName, upstream := s.Upstreams[source]
	builtin := slices.Contains(s.Toolsets, source) || source == SourceProgram || source == SourceDeclared
	switch {
	case source == "":
		at("source", "required: a toolset (%s), %s, %s, or an upstream's name", strings.Join(s.Toolsets, ", "), SourceDeclared, SourceProgram)
	case builtin && upstream:
		at("source", "%q names both a built-in source and an upstream; rename the upstream", source)
	case upstream:
		return rootName, true
	case slices.Contains(s.Toolsets, source) && !slices.Contains(s.Enabled, source):
		at("source", "the %s toolset is not enabled: add it to tools.toolsets", source)
	case builtin:
		return nil, true
	default:
		known := append(slices.Clone(s.Toolsets), SourceDeclared, SourceProgram)
		for name := range s.Upstreams {
			known = append(known, name)
		}
		slices.Sort(known)
		known = slices.Compact(known)
		at("source", "unknown source %q: want one of %s", source, strings.Join(known, ", "))
	}
	return nil, false
}

// checkPattern reports a name or URI pattern path.Match cannot use.
func checkPattern(p string) error {
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("bad pattern %q", p)
	}
	return nil
}

// checkArguments reports the problems of a single tool's arguments and
// fixed_arguments that need no input schema.
func (s *ToolSelection) checkArguments(at func(key, format string, args ...any)) {
	defaults := caseFold{}
	for _, name := range sortedKeys(s.Arguments) {
		a := s.Arguments[name]
		key := "arguments." + name
		switch _, fixed := s.FixedArguments[name]; {
		case strings.TrimSpace(name) == "":
			at(key, "an argument needs a name")
		case fixed:
			at(key, "%q is also in fixed_arguments, which removes it from the schema callers see", name)
		case a.Description == "" && a.Default == nil:
			at(key, "sets neither description nor default")
		case a.Default == nil:
		case !json.Valid(a.Default):
			at(key+".default", "%v", errNotJSON)
		default:
			defaults.note(name, key, at)
		}
	}
	fixed := caseFold{}
	for _, name := range sortedKeys(s.FixedArguments) {
		key := "fixed_arguments." + name
		switch {
		case strings.TrimSpace(name) == "":
			at(key, "an argument needs a name")
		case s.FixedArguments[name] != nil && !json.Valid(s.FixedArguments[name]):
			// Nil is no value: what decoded the exposure reports why.
			at(key, "%v", errNotJSON)
		default:
			fixed.note(name, key, at)
		}
	}
}

// caseFold holds argument names by their lower case, to find two that
// differ only in letter case: a call could name neither (see
// [Call.Arguments]).
type caseFold map[string]string

func (c caseFold) note(name, key string, at func(key, format string, args ...any)) {
	lower := strings.ToLower(name)
	if other, dup := c[lower]; dup {
		at(key, "%q and %q differ only in case: callers may name neither, so fix one", other, name)
		return
	}
	c[lower] = name
}

// exposedName is the name a single tool or prompt is exposed under:
// exposeAs, or its name on the root server (rootName gives an upstream's;
// nil for other sources).
func exposedName(exposeAs, name string, rootName func(string) string) string {
	switch {
	case exposeAs != "":
		return exposeAs
	case rootName != nil:
		return rootName(name)
	}
	return name
}

// noteExposed records that the selection at key exposes name, and
// reports it when another selection of the exposure exposes it too.
func noteExposed(exposed map[string]string, name, key string, renamed bool, at func(key, format string, args ...any), kind string) {
	field := "name"
	if renamed {
		field = "expose_as"
	}
	if other, dup := exposed[name]; dup {
		at(field, "the server would expose two %ss named %q (%s exposes one)", kind, name, other)
		return
	}
	exposed[name] = key
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
	check := func(key string, prop, v json.RawMessage, what string) {
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

// checkValue validates the JSON value v against the property schema prop
// of the schema root, with root's definitions, so that local references
// resolve.
func checkValue(root object, prop, v json.RawMessage) error {
	var instance any
	if err := json.Unmarshal(v, &instance); err != nil {
		return errNotJSON
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
	return resolved.Validate(instance)
}

// shortJSON is the JSON value v compacted, cut to a length that fits in
// a message.
func shortJSON(v json.RawMessage) string {
	b, err := jsonValue(v)
	if err != nil {
		b = v
	}
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}
