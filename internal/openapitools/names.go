package openapitools

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxNameLen is the longest tool or argument name made from a document.
// The MCP specification allows 128 characters, but the Claude API takes
// tool names and input schema property names of at most 64, so a longer
// one would make the whole tool list unusable there.
const MaxNameLen = 64

// cleanName returns s made of ASCII letters, digits, '_' and '-' only:
// each run of other characters becomes one '_', and leading and trailing
// '_' go. It leaves out '.' although MCP tool names may hold it, because
// the Claude API's tool names may not. The result is cut to MaxNameLen
// bytes and may be empty.
func cleanName(s string) string {
	var b strings.Builder
	under := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-':
			b.WriteByte(c)
			under = false
		case c == '_':
			b.WriteByte(c)
			under = true
		default:
			if !under {
				b.WriteByte('_')
				under = true
			}
		}
	}
	out := strings.Trim(b.String(), "_")
	if len(out) > MaxNameLen {
		out = strings.TrimRight(out[:MaxNameLen], "_")
	}
	return out
}

// toolName returns the name of the tool an operation becomes: its
// operationId cleaned, or the method and path when it has none (or none
// with a usable character): "get_pets_petId" for GET /pets/{petId}.
func toolName(operationID, method, path string) string {
	if n := cleanName(operationID); n != "" {
		return n
	}
	if n := cleanName(strings.ToLower(method) + "_" + path); n != "" {
		return n
	}
	return strings.ToLower(method)
}

// argName returns the argument a parameter or a body property becomes:
// its name cleaned, keeping '.' (input schema property names may hold
// it), or "arg" when nothing is left.
func argName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
			b.WriteByte(c)
		default:
			b.WriteByte('_')
		}
	}
	out := b.String()
	if len(out) > MaxNameLen {
		out = out[:MaxNameLen]
	}
	if strings.Trim(out, "_") == "" {
		return "arg"
	}
	return out
}

// unique returns name, or name with the smallest suffix "_2", "_3", …
// that taken does not hold, cut so that it stays within MaxNameLen.
func unique(name string, taken func(string) bool) string {
	if !taken(name) {
		return name
	}
	for i := 2; ; i++ {
		suffix := "_" + strconv.Itoa(i)
		base := name
		if len(base)+len(suffix) > MaxNameLen {
			base = base[:MaxNameLen-len(suffix)]
		}
		if n := base + suffix; !taken(n) {
			return n
		}
	}
}

// bounded returns s trimmed of surrounding space and cut to at most max
// runes, ending in "…" when cut.
func bounded(s string, max int) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	runes := []rune(s)
	return strings.TrimSpace(string(runes[:max-1])) + "…"
}
