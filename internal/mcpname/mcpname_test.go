package mcpname

import (
	"regexp"
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	// The rule as the specification writes it, to check the loop against.
	re := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"echo", true},
		{"get_weather-v2.1", true},
		{"A", true},
		{"0", true},
		{strings.Repeat("a", 128), true},
		{"", false},
		{strings.Repeat("a", 129), false},
		{"has space", false},
		{"slash/name", false},
		{"colon:name", false},
		{"plus+", false},
		{"é", false},
		{"tab\t", false},
		{"nul\x00", false},
		{"name\n", false},
	} {
		if got := Valid(tc.name); got != tc.want {
			t.Errorf("Valid(%q) = %v, want %v", tc.name, got, tc.want)
		}
		if re.MatchString(tc.name) != tc.want {
			t.Errorf("the specification's expression disagrees on %q", tc.name)
		}
	}
}

func FuzzValid(f *testing.F) {
	re := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	for _, s := range []string{"echo", "", "a.b-c_d", "x y", strings.Repeat("z", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if Valid(s) != re.MatchString(s) {
			t.Errorf("Valid(%q) = %v, the expression says %v", s, Valid(s), re.MatchString(s))
		}
	})
}
