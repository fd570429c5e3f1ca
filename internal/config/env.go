package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	suggestpkg "github.com/portcullis-mcp/portcullis/internal/suggest"
)

// applyEnv sets the keys named by the variables in environ that carry the
// schema's prefix, and returns the problems, in variable name order. An
// exact key name wins; a variable that names no key but is a Kubernetes
// service link ([IgnoredEnv]) is skipped; any other is a problem.
func (s *schema) applyEnv(root reflect.Value, environ []string) []*Problem {
	if s.prefix == "" {
		return nil
	}
	vars := s.envVars(environ)
	var problems []*Problem
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		source := "env " + name
		l, ok := s.env[name]
		if !ok {
			if path, ok := s.fileOnly[name]; ok {
				problems = append(problems, &Problem{Key: path, Source: source, Err: errors.New("a list of mappings, a mapping of names or a JSON value can be set only in the config file")})
				continue
			}
			if s.ignored(name) {
				continue
			}
			msg := "unknown environment variable"
			if sug := suggest(name, slices.Sorted(maps.Keys(s.env))); sug != "" {
				msg += "; did you mean " + sug + "?"
			}
			problems = append(problems, &Problem{Source: source, Err: errors.New(msg)})
			continue
		}
		if err := setEnv(walkTo(root, l.index), vars[name]); err != nil {
			problems = append(problems, &Problem{Key: l.path, Source: source, Err: err})
		}
	}
	return problems
}

// envVars returns the variables in environ that carry the schema's prefix,
// by name; when a name appears more than once, the last one wins.
func (s *schema) envVars(environ []string) map[string]string {
	vars := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(name, s.prefix) {
			vars[name] = value
		}
	}
	return vars
}

// walkTo returns the field at index below root, allocating nil pointers to
// structs on the way and copying non-nil ones, so that a default shared with
// other structs is never changed.
func walkTo(v reflect.Value, index [][]int) reflect.Value {
	for i, idx := range index {
		if i > 0 {
			for v.Kind() == reflect.Pointer {
				p := reflect.New(v.Type().Elem())
				if !v.IsNil() {
					p.Elem().Set(v.Elem())
				}
				v.Set(p)
				v = p.Elem()
			}
		}
		v = v.FieldByIndex(idx)
	}
	return v
}

// setEnv stores the variable value s into v: a scalar, or a comma-separated
// list of scalars.
func setEnv(v reflect.Value, s string) error {
	st := deref(v.Type())
	if st.Kind() != reflect.Slice || isScalar(st) {
		return setText(v, s)
	}
	var items []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	list := reflect.MakeSlice(st, len(items), len(items))
	var errs []error
	for i, item := range items {
		if err := setText(list.Index(i), item); err != nil {
			errs = append(errs, fmt.Errorf("item %d: %w", i+1, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for v.Kind() == reflect.Pointer {
		p := reflect.New(v.Type().Elem())
		v.Set(p)
		v = p.Elem()
	}
	v.Set(list)
	return nil
}

// suggest returns the candidate closest to name, or "" if none is close
// enough to be a likely typo.
func suggest(name string, candidates []string) string {
	return suggestpkg.Closest(name, candidates)
}
