package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"reflect"
	"slices"
)

// Load decodes the YAML document in data (may be empty/nil) into dst strictly,
// then overlays environment variables from environ ("KEY=value" strings, as
// [os.Environ] returns) whose names start with prefix (e.g. "PORTCULLIS_"). It
// returns every problem found at once, joined with [errors.Join]; each problem
// is a *[Problem]. File problems name the source "file:LINE"; use [LoadFile] to
// name the file.
//
// dst must be a non-nil pointer to a struct holding the defaults. On error,
// dst may have been partly updated: every value without a problem is set.
// When a variable appears in environ more than once, the last one wins.
func Load(dst any, data []byte, environ []string, prefix string) error {
	return load(dst, "file", data, nil, environ, prefix)
}

// LoadFile is [Load] with the YAML document read from the file at path; an
// empty path means no file. Problems in the file name it in their Source, as
// in "config.yaml:4". If the file cannot be read, that is a Problem too, and
// the environment is still applied and checked.
func LoadFile(dst any, path string, environ []string, prefix string) error {
	var (
		data    []byte
		readErr error
	)
	if path != "" {
		data, readErr = os.ReadFile(path)
		if pe, ok := errors.AsType[*fs.PathError](readErr); ok {
			readErr = pe.Err // the path is already in Source
		}
	}
	return load(dst, path, data, readErr, environ, prefix)
}

func load(dst any, name string, data []byte, readErr error, environ []string, prefix string) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return errors.Join(&Problem{Err: fmt.Errorf("config: Load needs a non-nil pointer to a struct, got %T", dst)})
	}
	s := newSchema(rv.Elem().Type(), prefix)
	if len(s.problems) > 0 {
		return join(s.problems)
	}
	var problems []*Problem
	if readErr != nil {
		problems = append(problems, &Problem{Source: name, Err: readErr})
	} else {
		d := &decoder{name: name, schema: s}
		d.document(data, rv.Elem())
		problems = append(problems, d.problems...)
	}
	problems = append(problems, s.applyEnv(rv.Elem(), environ)...)
	return join(problems)
}

// IgnoredEnv returns the names of the variables in environ that [Load] and
// [LoadFile] ignore for the struct type of dst and prefix, sorted: those
// that carry the prefix, match no key, and have the shape of a Kubernetes
// service-link variable for a Service whose name starts with the prefix
// (see the package documentation). A program logs them so that a variable
// meant as a key but ignored can be found; the values are not returned.
// dst may be a struct or a pointer to one; for anything else, and for an
// empty prefix, IgnoredEnv returns nil.
func IgnoredEnv(dst any, environ []string, prefix string) []string {
	t := reflect.TypeOf(dst)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct || prefix == "" {
		return nil
	}
	s := newSchema(t, prefix)
	var names []string
	for _, name := range slices.Sorted(maps.Keys(s.envVars(environ))) {
		if s.ignored(name) {
			names = append(names, name)
		}
	}
	return names
}
