package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzDecodeArguments: whatever the bytes, decodeArguments never panics,
// accepts only what encoding/json accepts as an object, and when it
// accepts, every key it keeps is one encoding/json reads the same value
// under (so that a rule and a Go tool never disagree), no two keys fold
// together, and no key folds to a name the rules read without being it.
func FuzzDecodeArguments(f *testing.F) {
	for _, seed := range []string{
		`{"database":"analytics","limit":5}`, `{"Database":"x"}`, `{"a":1,"a":2}`, `{"databaſe":1}`,
		`{"n":"5"}`, `{"o":{"p":[1,2,{"q":null}]}}`, `null`, ``, `[]`, `{"s":"\ud83d\ude00\u00e9"}`,
		`{"database":"a","blob":{"x":"}]\""}}`, `{"k":1e400}`, `{"k":-0.5E-3}`,
	} {
		f.Add([]byte(seed))
	}
	names := newArgNames([]string{"database", "limit", "key"}, []string{"database", "limit"}, false)
	all := newArgNames([]string{"database", "limit", "key"}, nil, true)
	f.Fuzz(func(t *testing.T, raw []byte) {
		trimmed := strings.TrimSpace(string(raw))
		empty := trimmed == "" || trimmed == "null"
		// Every argument decoded: accepted only what encoding/json reads
		// as an object, with the same keys.
		if got, err := decodeArguments(raw, all); err == nil && !empty {
			var want map[string]any
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatalf("%q: accepted, but encoding/json refuses it: %v", raw, err)
			}
			if len(got) != len(want) {
				t.Fatalf("%q: %d keys, encoding/json reads %d", raw, len(got), len(want))
			}
			checkKeys(t, raw, got, want)
		}
		// Only the named ones: the arguments no rule names are passed
		// over (a value encoding/json would refuse among them is the
		// tool's to refuse), and what is kept is as above.
		if got, err := decodeArguments(raw, names); err == nil && !empty {
			for k := range got {
				if k != "database" && k != "limit" {
					t.Fatalf("%q: key %q kept, which no rule names", raw, k)
				}
			}
			checkKeys(t, raw, got, nil)
		}
	})
}

// checkKeys fails unless every key of got is in want (nil: any) and
// none folds to a name the rules read without being it.
func checkKeys(t *testing.T, raw []byte, got, want map[string]any) {
	t.Helper()
	for k := range got {
		if _, ok := want[k]; want != nil && !ok {
			t.Fatalf("%q: key %q kept, which encoding/json does not read", raw, k)
		}
		for _, name := range []string{"database", "limit", "key"} {
			if k != name && strings.EqualFold(k, name) {
				t.Fatalf("%q: key %q kept, which folds to the name %q", raw, k, name)
			}
		}
	}
}
