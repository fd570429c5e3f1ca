package docscheck

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"testing"
)

const valuesSchemaPath = root + "/helm/portcullis/values.schema.json"

var (
	// goDocLink matches a Go doc link ([Name], [pkg.Name], [Type.Method]),
	// which names Go code an operator cannot look up. A Markdown link
	// ([text](url)) is not one.
	goDocLink = regexp.MustCompile(`\[\*?(?:[a-z][a-z0-9]*\.)?[A-Z][A-Za-z0-9_]*(?:\.[A-Z][A-Za-z0-9_]*)?\]($|[^(])`)
	// nilMeans matches "Nil means", Go's word for an unset pointer.
	nilMeans = regexp.MustCompile(`(?i)\bnil means\b`)
)

// goisms returns what in text is written for Go programmers rather than
// operators: Go doc links, whose constants the generator writes as their
// values and whose other targets the comments say in words, and "nil
// means", which is "Unset means" in a configuration file.
func goisms(text string) []string {
	var found []string
	for _, m := range goDocLink.FindAllStringSubmatchIndex(text, -1) {
		found = append(found, fmt.Sprintf("Go doc link %s", text[m[0]:m[2]]))
	}
	for _, m := range nilMeans.FindAllString(text, -1) {
		found = append(found, fmt.Sprintf("%q", m))
	}
	return found
}

// schemaDescriptions returns every description in the JSON schema
// document, each with where it is.
func schemaDescriptions(t *testing.T, doc []byte) map[string]string {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && k == "description" {
					out[at] = s
					continue
				}
				walk(at+"."+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", at, i), e)
			}
		}
	}
	walk("$", v)
	return out
}

// TestOperatorWording checks that docs/configuration.md and the
// descriptions of the chart's values.schema.json, both generated from Go
// doc comments, read as operator docs: no Go doc link and no "nil means".
func TestOperatorWording(t *testing.T) {
	md, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range goisms(string(md)) {
		t.Errorf("docs/configuration.md: %s: write the value or the words in the doc comment (or configuration-intro.md) and run go generate ./...", g)
	}
	schema, err := os.ReadFile(valuesSchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	descriptions := schemaDescriptions(t, schema)
	if len(descriptions) < 50 {
		t.Fatalf("values.schema.json: read %d descriptions, want one per key", len(descriptions))
	}
	for at, d := range descriptions {
		for _, g := range goisms(d) {
			t.Errorf("values.schema.json %s: %s: write the value or the words in the doc comment and run go generate ./...", at, g)
		}
	}
}

// TestGoisms shows that goisms finds each defect, planted, and passes
// what operator docs do write.
func TestGoisms(t *testing.T) {
	for _, tt := range []struct {
		name string
		text string
		want []string
	}{
		{name: "constant", text: "Zero means [DefaultFetchTimeout].", want: []string{"Go doc link [DefaultFetchTimeout]"}},
		{name: "at the end", text: "see [Policy]", want: []string{"Go doc link [Policy]"}},
		{name: "qualified", text: "as [clientreg.DefaultMaxDocumentBytes] says", want: []string{"Go doc link [clientreg.DefaultMaxDocumentBytes]"}},
		{name: "method", text: "[Handler.OriginGuard] applies it.", want: []string{"Go doc link [Handler.OriginGuard]"}},
		{name: "pointer", text: "a [*Options]", want: []string{"Go doc link [*Options]"}},
		{name: "nil means", text: "Nil means true.", want: []string{`"Nil means"`}},
		{name: "nil means inside", text: "the name; nil means none", want: []string{`"nil means"`}},
		{name: "both", text: "Nil means [DefaultX].", want: []string{"Go doc link [DefaultX]", `"Nil means"`}},
		{name: "Markdown link", text: "see [Sign-in](sign-in.md) and [Tasks](tasks.md#x)"},
		{name: "interval", text: "clamped to [min_cache_ttl, max_cache_ttl]"},
		{name: "optional port", text: "scheme://host[:port]"},
		{name: "list key", text: "`upstreams[].prefix`, list[i], [a-z]"},
		{name: "values", text: "Unset means true. Zero means `5s`. nil is not a word here"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := goisms(tt.text); !slices.Equal(got, tt.want) {
				t.Errorf("goisms(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}
