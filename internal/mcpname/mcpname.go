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
