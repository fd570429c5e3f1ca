package config

import (
	"errors"
	"fmt"
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
