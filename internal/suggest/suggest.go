// Package suggest finds the known name a mistyped one was meant to be, for
// "did you mean" hints in errors (unknown tools, config keys, countries).
package suggest

import (
	"strings"

	"github.com/agnivade/levenshtein"
)

// Distance is the Levenshtein distance between a and b in runes, ignoring
// case.
func Distance(a, b string) int {
	return levenshtein.ComputeDistance(strings.ToLower(a), strings.ToLower(b))
}

// Closest returns the candidate nearest to name, ignoring case, or "" when
// none is close enough to be a plausible typo: within two edits, or a third
// of name's length for longer names.
func Closest(name string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		if d := Distance(name, c); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(2, len([]rune(name))/3) {
		return ""
	}
	return best
}
