package mcpname

import (
	"fmt"
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

func TestSources(t *testing.T) {
	s := Sources{Section: "apis", TakenNames: map[string]string{"gh": "an upstream"}, TakenPrefixes: map[string]string{"gh": "an upstream"}}
	var got []string
	at := func(key, format string, args ...any) { got = append(got, key+": "+fmt.Sprintf(format, args...)) }
	s.Check(0, "a", "a", false, at)
	s.Check(1, "a", "", false, at)          // the name again, unprefixed
	s.Check(2, "b", "a", true, at)          // another's prefix
	s.Check(3, "gh", "gh", false, at)       // an upstream's name and prefix
	s.Check(4, "bad name", "ok", true, at)  // an invalid name
	s.Check(5, "c", "bad prefix", true, at) // an invalid prefix
	want := []string{
		`name: "a" is also the name of apis[0]`,
		`prefix: "a" is also the prefix of apis[0]; their tools would clash`,
		`name: "gh" is also the name of an upstream`,
		`prefix: "gh" is also the prefix of an upstream; their tools would clash`,
		`name: "bad name" must be 1 to 128 letters, digits, '_', '-' or '.'`,
		`prefix: "bad prefix" must be at most 64 letters, digits, '_', '-' or '.'`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
