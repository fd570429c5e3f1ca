package chartschema

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"go.yaml.in/yaml/v3"
)

// docFiles returns the documents whose ```yaml examples operators copy
// into a config file or into the chart's values: README.md and docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md"}, files...)
}

const valuesSchemaFile = "../../helm/portcullis/values.schema.json"

// committedConfigSchema returns the config part of the committed
// values.schema.json, resolved for validation.
func committedConfigSchema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	b, err := os.ReadFile(valuesSchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Properties struct {
			Config *jsonschema.Schema `json:"config"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	if values.Properties.Config == nil {
		t.Fatalf("%s has no properties.config", valuesSchemaFile)
	}
	r, err := values.Properties.Config.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// chartValueKeys are the chart's top-level values (the committed
// values.schema.json's properties) that are not the config value.
func chartValueKeys(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(valuesSchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for k := range values.Properties {
		if k != "config" {
			keys[k] = true
		}
	}
	return keys
}

// TestDocExamples validates every YAML config example in the README and
// docs/ against the config part of the committed values.schema.json:
// what the docs tell operators to write, the chart must accept.
func TestDocExamples(t *testing.T) {
	s := committedConfigSchema(t)
	chart := chartValueKeys(t)
	checked := 0
	for _, name := range docFiles(t) {
		md, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		n, errs := checkExamples(md, s, chart)
		for _, err := range errs {
			t.Errorf("%s: %v", name, err)
		}
		checked += n
	}
	// The docs hold dozens: config files, auth, upstreams, chart values.
	if checked < 12 {
		t.Errorf("checked %d config examples, want at least 12: are the ```yaml blocks still found?", checked)
	}
}

// TestCheckExamples shows that checkExamples finds mistakes, in both kinds
// of example, and leaves other YAML alone.
func TestCheckExamples(t *testing.T) {
	s := committedConfigSchema(t)
	md := "# Doc\n\n" +
		"```yaml\nlimits:\n  max_in_flight: 10\nmcp:\n  tool_timeout: 30s\n```\n" + // a config file: valid
		"```yaml\nserver:\n  listen: 0.0.0.0:8080\n  metrics_listen: 0.0.0.0:9090\n```\n" + // chart-owned keys are fine in a file
		"```yaml\nconfig:\n  auth:\n    jwks_max_age: 15m\ningress:\n  enabled: true\n```\n" + // values: valid
		"```yaml\nkind: Deployment\n```\n" + // not config: skipped
		"```sh\nlimits: {nonsense: 1}\n```\n" + // not YAML: skipped
		"```yaml\nlimits:\n  max_in_fligth: 10\n```\n" + // misspelled key in a file
		"```yaml\nconfig:\n  mcp:\n    tool_timeout: 30\n```\n" + // wrong type in values
		"```yaml\nconfig:\n  server:\n    listen: 0.0.0.0:1\n```\n" + // chart-owned key in values
		"```yaml\nauth:\n  resource: https://x/mcp\nrandom: 1\n```\n" + // unknown section in a file
		"```yaml\nauth: [\n```\n" + // broken YAML
		"```yaml\nconnections:\n  existingSecret: s\nextraVolumes: []\n```\n" // values without config, a key named as a section: skipped
	n, errs := checkExamples([]byte(md), s, chartValueKeys(t))
	if n != 7 {
		t.Errorf("checked %d examples, want 7", n)
	}
	wantErrs := []string{"line 27: ", "line 31: ", "line 36: ", "line 41: ", "line 46: "}
	var got []string
	for _, err := range errs {
		got = append(got, err.Error())
	}
	if len(got) != len(wantErrs) {
		t.Fatalf("errors:\n%s\nwant %d, at %v", strings.Join(got, "\n"), len(wantErrs), wantErrs)
	}
	for i, want := range wantErrs {
		if !strings.HasPrefix(got[i], want) {
			t.Errorf("error %d = %q, want it at %q", i, got[i], want)
		}
	}
}

var fence = regexp.MustCompile("(?ms)^```yaml\n(.*?)^```")

// checkExamples validates the config examples among the ```yaml blocks of
// md against s, the schema of the chart's config value, and returns how
// many it checked and what is wrong, by line. A block is a config example
// when it has a top-level config key (chart values: its value is checked)
// or a top-level key that is a config section (a config file: the whole
// block is checked, minus the keys the chart sets, which a file may hold).
// Other blocks (Kubernetes objects, values without config, which a
// top-level key of the chart's values, chart, that is not a config
// section tells apart from a file) are skipped.
func checkExamples(md []byte, s *jsonschema.Resolved, chart map[string]bool) (int, []error) {
	sections := s.Schema().Properties
	owned := ChartOwned()
	var (
		checked int
		errs    []error
	)
	for _, m := range fence.FindAllSubmatchIndex(md, -1) {
		line := 1 + strings.Count(string(md[:m[0]]), "\n")
		var doc map[string]any
		if err := yaml.Unmarshal(md[m[2]:m[3]], &doc); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", line, err))
			continue
		}
		var cfg any
		switch {
		case doc["config"] != nil:
			cfg = doc["config"]
		case slices.ContainsFunc(keysOf(doc), func(k string) bool { return chart[k] && sections[k] == nil }):
			continue
		case slices.ContainsFunc(keysOf(doc), func(k string) bool { return sections[k] != nil }):
			for _, key := range owned {
				deleteKey(doc, strings.Split(key, "."))
			}
			cfg = doc
		default:
			continue
		}
		checked++
		// The validator wants JSON values (float64 numbers, map[string]any).
		b, err := json.Marshal(cfg)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", line, err))
			continue
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", line, err))
			continue
		}
		if err := s.Validate(v); err != nil {
			errs = append(errs, fmt.Errorf("line %d: the chart's schema rejects this example: %w", line, err))
		}
	}
	return checked, errs
}

func keysOf(m map[string]any) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// deleteKey removes the key at path from a decoded YAML mapping.
func deleteKey(m map[string]any, path []string) {
	if len(path) == 1 {
		delete(m, path[0])
		return
	}
	if sub, ok := m[path[0]].(map[string]any); ok {
		deleteKey(sub, path[1:])
	}
}
