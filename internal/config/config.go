package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"strings"
)

// Problem is one configuration error, tied to the key it concerns.
type Problem struct {
	// Key is the dotted key path, such as "server.read_header_timeout" or
	// "tools.resources[1].uri". For an environment variable it is the key the
	// variable maps to. It is empty for a problem with the whole document or
	// with a variable that maps to no key.
	Key string
	// Source says where the value came from: "NAME:LINE" for the YAML file
	// (NAME is the path given to LoadFile, or "file" for Load), just NAME
	// when the file cannot be read or parsed at all, or "env NAME" for an
	// environment variable. It is empty for a problem with the struct type
	// itself, which is a programming error.
	Source string
	// Err is what is wrong.
	Err error
}

// Error formats the problem as key, then source, then error, for example
// `server.read_header_timeout (config.yaml line 4): time: invalid duration "ten"`.
func (p *Problem) Error() string {
	where := p.Source
	if i := strings.LastIndexByte(where, ':'); i >= 0 && isDigits(where[i+1:]) {
		where = where[:i] + " line " + where[i+1:]
	}
	var b strings.Builder
	switch {
	case p.Key != "" && where != "":
		fmt.Fprintf(&b, "%s (%s)", p.Key, where)
	case p.Key != "":
		b.WriteString(p.Key)
	default:
		b.WriteString(where)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if p.Err != nil {
		b.WriteString(p.Err.Error())
	} else {
		b.WriteString("invalid")
	}
	return b.String()
}

// Unwrap returns p.Err.
func (p *Problem) Unwrap() error { return p.Err }

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Problems unwraps an error returned by [Load] or [LoadFile] (or any
// [errors.Join] or %w wrapping of Problems) into the list of problems, in
// order. Errors in the tree that are not Problems are left out. It returns
// nil for a nil error.
func Problems(err error) []*Problem {
	var out []*Problem
	var walk func(error)
	walk = func(e error) {
		switch x := e.(type) {
		case nil:
		case *Problem:
			out = append(out, x)
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(x.Unwrap())
		}
	}
	walk(err)
	return out
}

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

func join(problems []*Problem) error {
	if len(problems) == 0 {
		return nil
	}
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = p
	}
	return errors.Join(errs...)
}
