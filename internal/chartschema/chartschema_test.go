package chartschema

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/portcullis-mcp/portcullis/internal/config"
)

// testOptions and testRule are the config types of the tests; their doc
// comments are read back as descriptions.
type testOptions struct {
	// Listen is the address to serve on. The chart sets it.
	Listen string `yaml:"listen"`
	// Grace bounds shutdown once Listen is closed. Default 25s.
	Grace time.Duration `yaml:"grace"`
	// Rules lists per-tool timeouts.
	Rules []testRule `yaml:"rules"`
	// Level, debug or info, sets what is logged.
	Level string `yaml:"level" schema:"enum=debug|info"`
	// LevelNamesByCode is not renamed: only the field's whole name is.
	LevelNames []string `yaml:"level_names"`
	Plain      int      `yaml:"plain"`
	// URL is where the URL of Plain is, fetched within [testTimeout].
	URL string `yaml:"url"`
}

// testTimeout is the constant testOptions.URL's doc links to.
//
//lint:ignore U1000 read from this file's source by the generator, not used by code
const testTimeout = 10 * time.Second

type testRule struct {
	// Tool names the tool.
	Tool string `yaml:"tool" schema:"required"`
	// Secret is a file the chart mounts.
	Secret string `yaml:"secret"`
}

// testLinkConfig has a doc comment that links a type: not something the
// generated docs can write out.
type testLinkConfig struct {
	// Mode is what [Override] says.
	Mode string `yaml:"mode"`
}

type testConfig struct {
	// Server configures serving.
	Server testOptions `yaml:"server"`
}

const testValues = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {
    "replicaCount": {"type": "integer"},
    "config": {
      "type": "object"
    },
    "after": {
      "type": "object",
      "properties": {"config": {"type": "string"}}
    }
  }
}
`

func TestGenerate(t *testing.T) {
	got, err := Generate(&testConfig{}, "../..", []byte(testValues), []Override{{Key: "server.rules[].secret", ChartOwned: true}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {
    "replicaCount": {"type": "integer"},
    "config": {
      "type": "object",
      "properties": {
        "server": {
          "type": "object",
          "properties": {
            "listen": {
              "type": "string",
              "description": "listen is the address to serve on."
            },
            "grace": {
              "type": "string",
              "description": "grace bounds shutdown once listen is closed.",
              "pattern": "` + jsonEscape(config.DurationPattern) + `"
            },
            "rules": {
              "type": "array",
              "items": {
                "type": "object",
                "properties": {
                  "tool": {
                    "type": "string",
                    "description": "tool names the tool.",
                    "minLength": 1
                  }
                },
                "description": "The chart sets secret.",
                "required": [
                  "tool"
                ],
                "additionalProperties": false
              },
              "description": "rules lists per-tool timeouts."
            },
            "level": {
              "type": "string",
              "description": "level, debug or info, sets what is logged.",
              "enum": [
                "debug",
                "info"
              ]
            },
            "level_names": {
              "type": "array",
              "items": {
                "type": "string"
              },
              "description": "LevelNamesByCode is not renamed: only the field's whole name is."
            },
            "plain": {
              "type": "integer"
            },
            "url": {
              "type": "string",
              "description": "url is where the URL of plain is, fetched within ` + "`10s`" + `."
            }
          },
          "description": "server configures serving.",
          "additionalProperties": false
        }
      },
      "description": "` + jsonEscape(Description) + `",
      "additionalProperties": false
    },
    "after": {
      "type": "object",
      "properties": {"config": {"type": "string"}}
    }
  }
}
`
	if string(got) != want {
		t.Errorf("Generate =\n%s\nwant\n%s", got, want)
	}
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func testSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	s, err := config.JSONSchema(&testConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestApply(t *testing.T) {
	s := testSchema(t)
	s.Properties["server"].Description = "server configures serving."
	err := Apply(s, []Override{
		{Key: "server.listen", ChartOwned: true},
		{Key: "server.rules[].secret", ChartOwned: true},
		{Key: "server.rules[].tool", ChartOwned: true},
		{Key: "server.grace", Pattern: wholeDuration, NonEmpty: true, Note: "Whole seconds."},
	})
	if err != nil {
		t.Fatal(err)
	}
	server := s.Properties["server"]
	if _, ok := server.Properties["listen"]; ok || strings.Contains(strings.Join(server.PropertyOrder, ","), "listen") {
		t.Errorf("server.listen is still in the schema: %v", server.PropertyOrder)
	}
	if got, want := server.Description, "server configures serving. The chart sets listen."; got != want {
		t.Errorf("server description = %q, want %q", got, want)
	}
	rule := server.Properties["rules"].Items
	if len(rule.Properties) != 0 || len(rule.Required) != 0 {
		t.Errorf("rules[] keeps %v, required %v; want none", rule.PropertyOrder, rule.Required)
	}
	if got, want := rule.Description, "The chart sets secret and tool."; got != want {
		t.Errorf("rules[] description = %q, want %q", got, want)
	}
	grace := server.Properties["grace"]
	if grace.Pattern != wholeDuration || grace.MinLength == nil || *grace.MinLength != 1 || grace.Description != "Whole seconds." {
		t.Errorf("server.grace = pattern %q, minLength %v, description %q", grace.Pattern, grace.MinLength, grace.Description)
	}

	resolved, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		doc   string
		valid bool
	}{
		{name: "whole duration", doc: `{"server": {"grace": "1m30s"}}`, valid: true},
		{name: "fractional duration", doc: `{"server": {"grace": "1.5s"}}`},
		{name: "empty duration", doc: `{"server": {"grace": ""}}`},
		{name: "chart-owned key", doc: `{"server": {"listen": ":80"}}`},
	} {
		var v any
		if err := json.Unmarshal([]byte(tt.doc), &v); err != nil {
			t.Fatal(err)
		}
		if err := resolved.Validate(v); (err == nil) != tt.valid {
			t.Errorf("%s: Validate(%s) = %v, want valid %v", tt.name, tt.doc, err, tt.valid)
		}
	}
}

func TestApplyUnknownKey(t *testing.T) {
	err := Apply(testSchema(t), []Override{
		{Key: "server.lisen", ChartOwned: true},
		{Key: "server.listen[].x", Pattern: "x"},
		{Key: "nothing"},
	})
	for _, key := range []string{"server.lisen", "server.listen[].x", "nothing"} {
		if err == nil || !strings.Contains(err.Error(), "override of "+key+": no such key") {
			t.Errorf("Apply: %v, want it to name %s", err, key)
		}
	}
}

// TestOverridesMatchConfig is in the root package (TestChartSchemaHasEveryKey):
// only there is the real Config at hand. This one checks the list itself.
func TestOverrides(t *testing.T) {
	want := []string{"server.listen", "server.metrics_listen", "mcp.request_state.keys_file", "auth.introspection.client_secret_file", "authorization_server.keys_file", "authorization_server.idp.client_secret_file", "connections.keys_file", "redis.url", "redis.sentinel.master_name", "redis.sentinel.addresses", "redis.sentinel.password", "redis.cluster.addresses", "redis.password", "redis.tls.ca_file"}
	if got := ChartOwned(); !reflect.DeepEqual(got, want) {
		t.Errorf("ChartOwned = %v, want %v", got, want)
	}
}

func TestSpliceErrors(t *testing.T) {
	s := testSchema(t)
	for _, tt := range []struct {
		name, values, wantErr string
	}{
		{name: "not JSON", values: `nope`, wantErr: "invalid character"},
		{name: "not an object", values: `[]`, wantErr: "not an object"},
		{name: "no properties", values: `{"type": "object"}`, wantErr: "no properties"},
		{name: "no config", values: `{"properties": {"replicaCount": {}}}`, wantErr: "no properties.config"},
		{name: "config elsewhere only", values: `{"definitions": {"config": {}}, "properties": {}}`, wantErr: "no properties.config"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Splice([]byte(tt.values), s)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Splice: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	if _, err := Generate(&testConfig{}, t.TempDir(), []byte(testValues), nil); err == nil || !strings.Contains(err.Error(), "go.mod") {
		t.Errorf("Generate without go.mod: %v, want an error naming go.mod", err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(&testConfig{}, other, []byte(testValues), nil); err == nil || !strings.Contains(err.Error(), "not in module example.com/other") {
		t.Errorf("Generate in another module: %v, want an error naming the module", err)
	}
	const wantLink = "testLinkConfig.Mode: [Override] names no constant"
	if _, err := Generate(&testLinkConfig{}, "../..", []byte(testValues), nil); err == nil || !strings.Contains(err.Error(), wantLink) {
		t.Errorf("Generate with a doc link to a type: %v, want an error containing %q", err, wantLink)
	}
	if _, err := Reference(&testLinkConfig{}, "../..", ReferenceOptions{}); err == nil || !strings.Contains(err.Error(), wantLink) {
		t.Errorf("Reference with a doc link to a type: %v, want an error containing %q", err, wantLink)
	}
}

// TestTypeOf: the type column of the reference, for maps and JSON values
// among the rest; a section (additionalProperties false) is no map.
func TestTypeOf(t *testing.T) {
	str := &jsonschema.Schema{Type: "string"}
	obj := &jsonschema.Schema{Type: "object", AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}
	tests := []struct {
		name  string
		p     *jsonschema.Schema
		want  string
		isMap bool
	}{
		{name: "JSON value", p: &jsonschema.Schema{}, want: "JSON value"},
		{name: "map of strings", p: &jsonschema.Schema{Type: "object", AdditionalProperties: str}, want: "mapping of names to strings", isMap: true},
		{name: "map of JSON values", p: &jsonschema.Schema{Type: "object", AdditionalProperties: &jsonschema.Schema{}}, want: "mapping of names to JSON values", isMap: true},
		{name: "map of objects", p: &jsonschema.Schema{Type: "object", AdditionalProperties: obj}, want: "mapping of names to objects", isMap: true},
		{name: "section", p: obj, want: "object"},
		{name: "list of strings", p: &jsonschema.Schema{Type: "array", Items: str}, want: "list of strings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := typeOf(tt.p); got != tt.want {
				t.Errorf("typeOf = %q, want %q", got, tt.want)
			}
			if got := isMap(tt.p); got != tt.isMap {
				t.Errorf("isMap = %v, want %v", got, tt.isMap)
			}
		})
	}
}
