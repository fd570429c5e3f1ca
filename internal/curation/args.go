package curation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Call sets a curated tool's fixed arguments and defaults on the
// arguments of its calls. Make one with [NewCall]; the zero value, and
// nil, pass arguments on unchanged.
type Call struct {
	fixed    []preset // sorted by name
	defaults []preset // sorted by name
}

// preset is an argument set by Portcullis: its name and the JSON member
// ("name":value) that sets it.
type preset struct {
	name   string
	member []byte
}

// ErrFixedArgument is wrapped by the error [Call.Arguments] returns for a
// call that names a fixed argument.
var ErrFixedArgument = errors.New("the argument is fixed")

// ErrArgumentsNotObject is wrapped by the error [Call.Arguments] returns
// for arguments that are not a JSON object.
var ErrArgumentsNotObject = errors.New("arguments must be a JSON object")

// NewCall returns the Call of the tool s curates, or nil when s sets no
// argument. An argument value that is not JSON is an error ([View.Check]
// reports it).
func NewCall(s *ToolSelection) (*Call, error) {
	c := &Call{}
	for _, name := range sortedKeys(s.FixedArguments) {
		p, err := newPreset(name, s.FixedArguments[name])
		if err != nil {
			return nil, fmt.Errorf("curation: fixed argument %q: %w", name, err)
		}
		c.fixed = append(c.fixed, p)
	}
	for _, name := range sortedKeys(s.Arguments) {
		if d := s.Arguments[name].Default; d != nil {
			p, err := newPreset(name, d)
			if err != nil {
				return nil, fmt.Errorf("curation: default of argument %q: %w", name, err)
			}
			c.defaults = append(c.defaults, p)
		}
	}
	if len(c.fixed) == 0 && len(c.defaults) == 0 {
		return nil, nil
	}
	return c, nil
}

func newPreset(name string, v any) (preset, error) {
	value, err := jsonValue(v)
	if err != nil {
		return preset{}, err
	}
	m := append(mustJSON(name), ':')
	return preset{name: name, member: append(m, value...)}, nil
}

// Arguments returns the arguments a call with args (a JSON object, or
// empty or null for none) reaches the tool with: args with every fixed
// argument, and the default of every described argument args leaves out.
//
// A call that names a fixed argument, by its exact name or by one that
// differs only in letter case (as decoders that match names without
// regard to case would read it), is refused with an error wrapping
// [ErrFixedArgument]: the tool never sees the caller's value. Arguments
// are read from args alone: a value in the request's _meta is no
// argument.
func (c *Call) Arguments(args json.RawMessage) (json.RawMessage, error) {
	if c == nil {
		return args, nil
	}
	trimmed := bytes.TrimSpace(args)
	var keys map[string]json.RawMessage
	if len(trimmed) > 0 && !bytes.Equal(trimmed, []byte("null")) {
		if trimmed[0] != '{' || json.Unmarshal(trimmed, &keys) != nil {
			return nil, ErrArgumentsNotObject
		}
	}
	for key := range keys {
		for _, f := range c.fixed {
			if strings.EqualFold(key, f.name) {
				return nil, fmt.Errorf("%w: %q is set by the server for this tool and cannot be given in a call; leave it out", ErrFixedArgument, key)
			}
		}
	}
	var b bytes.Buffer
	if len(keys) == 0 {
		b.WriteByte('{')
	} else {
		b.Grow(len(trimmed) + 64)
		b.Write(trimmed[:len(trimmed)-1]) // without its closing brace
	}
	n := len(keys)
	add := func(p preset) {
		if n > 0 {
			b.WriteByte(',')
		}
		b.Write(p.member)
		n++
	}
	for _, f := range c.fixed {
		add(f)
	}
	for _, d := range c.defaults {
		if !hasFold(keys, d.name) {
			add(d)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// hasFold reports whether keys has name, in any letter case.
func hasFold(keys map[string]json.RawMessage, name string) bool {
	if _, ok := keys[name]; ok {
		return true
	}
	for k := range keys {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
