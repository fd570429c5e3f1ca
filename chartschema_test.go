package portcullis

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/portcullis-mcp/portcullis/internal/chartschema"
	"github.com/portcullis-mcp/portcullis/internal/config"
)

var update = flag.Bool("update", false, "rewrite the config part of "+valuesSchemaPath+" and "+referencePath)

const valuesSchemaPath = "helm/portcullis/values.schema.json"

// generateChartSchema returns values.schema.json as it must be: its config
// part generated from configFile.
func generateChartSchema(t *testing.T) []byte {
	t.Helper()
	old, err := os.ReadFile(valuesSchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	got, err := chartschema.Generate(&configFile{}, ".", old, chartschema.Overrides)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestGenerateChartSchema fails when the config part of the chart's
// values.schema.json is not what configFile generates. With -update (which
// `go generate .` passes) it rewrites the file instead.
func TestGenerateChartSchema(t *testing.T) {
	want := generateChartSchema(t)
	if *update {
		writeIfChanged(t, valuesSchemaPath, want)
		return
	}
	got, err := os.ReadFile(valuesSchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run go generate . (make generate) and commit it\n%s", valuesSchemaPath, firstDiff(got, want))
	}
}

// writeIfChanged writes data to path unless path holds it already: go
// generate on an up-to-date tree touches nothing, so the tests and checks
// that make test runs beside generate-check never read a file half
// rewritten.
func writeIfChanged(t *testing.T, path string, data []byte) {
	t.Helper()
	if got, err := os.ReadFile(path); err == nil && bytes.Equal(got, data) {
		return
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n  have %s\n  want %s", i+1, gl, wl)
		}
	}
	return ""
}

// configSchema returns the config part of the generated values schema.
func configSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	var values struct {
		Properties struct {
			Config *jsonschema.Schema `json:"config"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(generateChartSchema(t), &values); err != nil {
		t.Fatal(err)
	}
	return values.Properties.Config
}

// TestChartSchemaHasEveryKey checks that every key the server accepts is
// a key the chart accepts, except the ones the chart sets itself.
func TestChartSchemaHasEveryKey(t *testing.T) {
	s := configSchema(t)
	owned := chartschema.ChartOwned()
	keys := config.Keys(&configFile{}, envPrefix)
	if len(keys) < 40 {
		t.Fatalf("config.Keys lists %d keys; configFile has more", len(keys))
	}
	for _, k := range keys {
		p := s
		for name := range strings.SplitSeq(k.Path, ".") {
			if p = p.Properties[name]; p == nil {
				break
			}
		}
		switch chartOwned := slices.Contains(owned, k.Path); {
		case p == nil && !chartOwned:
			t.Errorf("%s is a config key, but the chart's schema rejects it", k.Path)
		case p != nil && chartOwned:
			t.Errorf("%s is set by the chart, but the chart's schema accepts it in config", k.Path)
		}
	}
}

// TestChartSchemaEnums checks that the server accepts every value a
// `schema:"enum=…"` tag lists, so a typo in a tag cannot make the chart
// offer a value the server refuses, and that it refuses one outside them.
func TestChartSchemaEnums(t *testing.T) {
	s := configSchema(t)
	tests := []struct {
		name string
		path []string // to the string schema with the enum
		doc  string   // %s is the value
	}{
		{name: "log level", path: []string{"log", "level"}, doc: "log: {level: %s}"},
		{name: "toolsets", path: []string{"tools", "toolsets", "[]"}, doc: "tools: {toolsets: [%s]}"},
		{name: "introspection auth method", path: []string{"auth", "introspection", "auth_method"},
			doc: "auth: {resource: https://mcp.example.com/mcp, introspection: {url: https://idp.example.com/introspect, client_id: c, client_secret_file: /dev/null, auth_method: %s, token_url: https://idp.example.com/token}}"},
		{name: "issuer algorithms", path: []string{"auth", "issuers", "[]", "algorithms", "[]"},
			doc: "auth: {resource: https://mcp.example.com/mcp, issuers: [{issuer: https://idp.example.com, algorithms: [%s]}]}"},
		{name: "prompt role", path: []string{"tools", "prompts", "[]", "role"},
			doc: "tools: {prompts: [{name: p, text: hi, role: %s}]}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := s
			for _, name := range tt.path {
				if name == "[]" {
					p = p.Items
				} else {
					p = p.Properties[name]
				}
				if p == nil {
					t.Fatalf("no schema at %v", tt.path)
				}
			}
			if len(p.Enum) == 0 {
				t.Fatalf("the schema at %v has no enum", tt.path)
			}
			for _, v := range append(slices.Clone(p.Enum), "not-a-value") {
				path := t.TempDir() + "/config.yaml"
				if err := os.WriteFile(path, fmt.Appendf(nil, tt.doc, v), 0o600); err != nil {
					t.Fatal(err)
				}
				_, err := loadConfig(path, nil, nil)
				switch {
				case v == "not-a-value" && err == nil:
					t.Errorf("the server accepts %q, so the test shows nothing", v)
				case v != "not-a-value" && err != nil:
					t.Errorf("the schema offers %q, but the server refuses it: %v", v, err)
				}
			}
		})
	}
}

const (
	referencePath = "docs/configuration.md"
	// referenceIntro is the prose at the top of the reference.
	referenceIntro = "internal/docscheck/configuration-intro.md"
)

// reference returns docs/configuration.md as it must be: generated from
// configFile, the configuration that `portcullis check-config --keys` lists
// (internal/docscheck checks that the two agree).
func reference(t *testing.T) []byte {
	t.Helper()
	intro, err := os.ReadFile(referenceIntro)
	if err != nil {
		t.Fatal(err)
	}
	b, err := chartschema.Reference(&configFile{}, ".", chartschema.ReferenceOptions{
		Title:     "Configuration reference",
		Intro:     string(intro),
		Generator: "`go generate .` at the module root (make generate)",
		IntroFile: referenceIntro,
		EnvPrefix: envPrefix,
		Overrides: chartschema.Overrides,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConfigReference fails when docs/configuration.md is not what the Go
// config types generate. With -update (which `go generate .` passes) it
// rewrites the file instead.
func TestConfigReference(t *testing.T) {
	want := reference(t)
	if *update {
		writeIfChanged(t, referencePath, want)
		return
	}
	got, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run go generate . (make generate) and commit it\n%s", referencePath, firstDiff(got, want))
	}
}

// TestChartDrainDefaults: the chart's check of terminationGracePeriodSeconds
// assumes the binary's defaults for server.drain_delay and
// server.shutdown_grace when they are unset.
func TestChartDrainDefaults(t *testing.T) {
	tpl, err := os.ReadFile("helm/portcullis/templates/_helpers.tpl")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		want time.Duration
	}{
		{name: "drain_delay", want: defaultDrainDelay},
		{name: "shutdown_grace", want: defaultShutdownGrace},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := regexp.MustCompile(`\$server\.` + tt.name + ` \| default "([^"]*)"`).FindSubmatch(tpl)
			if m == nil {
				t.Fatalf("_helpers.tpl has no default for $server.%s", tt.name)
			}
			got, err := time.ParseDuration(string(m[1]))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("the chart assumes %s defaults to %v, the binary to %v", tt.name, got, tt.want)
			}
		})
	}
}
