// Package mcpname checks names against the MCP specification's rule for
// tool names, which Portcullis also applies to prompt and upstream names:
// 1 to 128 ASCII letters, digits, '_', '-' or '.'.
//
// It is a loop rather than the regular expression ^[A-Za-z0-9_.-]{1,128}$,
// whose compiled program repeats the character class 128 times: about
// 120 KB allocated at start-up for each package that compiled it.
package mcpname

// MaxLen is the longest name allowed.
const MaxLen = 128

// Valid reports whether name is 1 to MaxLen ASCII letters, digits, '_',
// '-' or '.'.
func Valid(name string) bool {
	if len(name) == 0 || len(name) > MaxLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}

// Sources checks the names and prefixes of a list of sources of tools
// (the upstreams, the HTTP APIs), entry by entry: each name valid and used
// once in the list and not among TakenNames; each prefix (the namespace
// its tools are served under) valid where it is set explicitly, and used
// once in the list and not among TakenPrefixes. The taken maps name what
// holds each ("an upstream").
type Sources struct {
	// Section names the list in messages ("upstreams", "http_apis").
	Section                   string
	TakenNames, TakenPrefixes map[string]string

	names, prefixes map[string]int
}

// Check checks entry i, called name, whose tools are served under prefix
// (empty: unprefixed), set is whether the prefix was configured rather
// than defaulted to the name; at reports a problem under a key of the
// entry.
func (s *Sources) Check(i int, name, prefix string, set bool, at func(key, format string, args ...any)) {
	if s.names == nil {
		s.names, s.prefixes = map[string]int{}, map[string]int{}
	}
	switch j, dup := s.names[name]; {
	case !Valid(name):
		at("name", "%q must be 1 to 128 letters, digits, '_', '-' or '.'", name)
	case dup:
		at("name", "%q is also the name of %s[%d]", name, s.Section, j)
	case s.TakenNames[name] != "":
		at("name", "%q is also the name of %s", name, s.TakenNames[name])
	}
	s.names[name] = i
	if prefix == "" {
		return
	}
	switch j, dup := s.prefixes[prefix]; {
	case set && (!Valid(prefix) || len(prefix) > 64):
		at("prefix", "%q must be at most 64 letters, digits, '_', '-' or '.'", prefix)
	case dup:
		at("prefix", "%q is also the prefix of %s[%d]; their tools would clash", prefix, s.Section, j)
	case s.TakenPrefixes[prefix] != "":
		at("prefix", "%q is also the prefix of %s; their tools would clash", prefix, s.TakenPrefixes[prefix])
	default:
		s.prefixes[prefix] = i
	}
}
