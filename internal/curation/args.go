package curation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
	name   []byte
	member []byte
}

// ErrFixedArgument is wrapped by the error [Call.Arguments] returns for a
// call that names a fixed argument.
var ErrFixedArgument = errors.New("the argument is fixed")

// ErrArgumentCase is wrapped by the error [Call.Arguments] returns for a
// call that names an argument with a default by a key that differs from
// the argument's name only in letter case.
var ErrArgumentCase = errors.New("the argument is named in another letter case")

// ErrArgumentsNotObject is wrapped by the error [Call.Arguments] returns
// for arguments that are not a JSON object.
var ErrArgumentsNotObject = errors.New("arguments must be a JSON object")

// NewCall returns the Call of the tool s curates, or nil when s sets no
// argument. An argument value that is not JSON is an error
// ([Exposure.Check] reports it).
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

func newPreset(name string, v json.RawMessage) (preset, error) {
	value, err := jsonValue(v)
	if err != nil {
		return preset{}, err
	}
	m := append(mustJSON(name), ':')
	return preset{name: []byte(name), member: append(m, value...)}, nil
}

// Arguments returns the arguments a call with args (a JSON object, or
// empty or null for none) reaches the tool with: args with every fixed
// argument, and the default of every described argument args leaves out.
//
// A call that names a fixed argument, by its exact name or by one that
// differs only in letter case (as decoders that match names without
// regard to case would read it), escaped or not, is refused with an error
// wrapping [ErrFixedArgument]: the tool never sees the caller's value.
// A call that names an argument with a default by a key that differs
// from its name only in letter case is refused too, with an error
// wrapping [ErrArgumentCase]: set beside the default, the key would
// reach a tool that matches names without regard to case as a second
// value of the argument, and left alone it would leave the argument
// without its default at a tool that matches names exactly.
// Arguments are read from args alone: a value in the request's _meta is
// no argument.
func (c *Call) Arguments(args json.RawMessage) (json.RawMessage, error) {
	if c == nil {
		return args, nil
	}
	obj := bytes.TrimSpace(args)
	if len(obj) == 0 || bytes.Equal(obj, []byte("null")) {
		obj = []byte("{}")
	}
	if obj[0] != '{' || !json.Valid(obj) {
		return nil, ErrArgumentsNotObject
	}
	var present uint64 // bit i: defaults[i] is given (at most 64 are looked for)
	keys := 0
	for key, i := nextKey(obj, 0); i >= 0; key, i = nextKey(obj, i) {
		keys++
		for _, f := range c.fixed {
			if bytes.EqualFold(key, f.name) {
				return nil, fmt.Errorf("%w: %q is set by the server for this tool and cannot be given in a call; leave it out", ErrFixedArgument, key)
			}
		}
		for j, d := range c.defaults {
			if !bytes.EqualFold(key, d.name) {
				continue
			}
			if !bytes.Equal(key, d.name) {
				return nil, fmt.Errorf("%w: %q is not %q, which the server gives a default when a call leaves it out; name it exactly", ErrArgumentCase, key, d.name)
			}
			if j < 64 {
				present |= 1 << j
			}
		}
	}
	size := len(obj)
	for _, p := range c.fixed {
		size += len(p.member) + 1
	}
	for _, p := range c.defaults {
		size += len(p.member) + 1
	}
	out := make([]byte, 0, size)
	out = append(out, obj[:bytes.LastIndexByte(obj, '}')]...)
	add := func(p preset) {
		if keys > 0 {
			out = append(out, ',')
		}
		out = append(out, p.member...)
		keys++
	}
	for _, f := range c.fixed {
		add(f)
	}
	for j, d := range c.defaults {
		if j >= 64 || present&(1<<j) == 0 {
			add(d)
		}
	}
	return append(out, '}'), nil
}

// nextKey returns the next key of the JSON object obj (valid JSON) at or
// after position i, unquoted, and the position after it; i is -1 when
// there is none. Keys of nested objects are skipped.
func nextKey(obj []byte, i int) (key []byte, next int) {
	depth := 0
	if i > 0 {
		depth = 1
	}
	for ; i < len(obj); i++ {
		switch obj[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			end := i + 1
			escaped := false
			for ; obj[end] != '"'; end++ {
				if obj[end] == '\\' {
					escaped = true
					end++
				}
			}
			if depth == 1 && colonFollows(obj, end+1) {
				if !escaped {
					return obj[i+1 : end], end + 1
				}
				var k string
				_ = json.Unmarshal(obj[i:end+1], &k) // valid: obj is
				return []byte(k), end + 1
			}
			i = end
		}
	}
	return nil, -1
}

// colonFollows reports whether the first byte at or after i that is not
// white space is a colon: the string before i is a key.
func colonFollows(obj []byte, i int) bool {
	for ; i < len(obj); i++ {
		switch obj[i] {
		case ' ', '\t', '\n', '\r':
		default:
			return obj[i] == ':'
		}
	}
	return false
}
