package config

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// SchemaInlined is exported: Load skips unexported embedded structs.
type SchemaInlined struct {
	// Shared is inlined into its parent.
	Shared string `yaml:"shared"`
}

type schemaRule struct {
	Tool    string        `yaml:"tool" schema:"required"`
	Timeout time.Duration `yaml:"timeout"`
}

type schemaConfig struct {
	Server struct {
		Listen  string        `yaml:"listen"`
		Timeout time.Duration `yaml:"timeout"`
		Addr    netip.Addr    `yaml:"addr"`
		Debug   *bool         `yaml:"debug"`
		Bytes   int64         `yaml:"bytes" schema:"min=0"`
		Workers uint          `yaml:"workers"`
		Ratio   float64       `yaml:"ratio" schema:"min=0.5"`
	} `yaml:"server"`
	Tools *struct {
		Sets    []string `yaml:"sets" schema:"enum=core|extra,unique"`
		BaseURL string   `yaml:"base_url" schema:"url"`
	} `yaml:"tools"`
	Origins       []string     `yaml:"origins" schema:"origin"`
	Rules         []schemaRule `yaml:"rules"`
	SchemaInlined `yaml:",inline"`
	Level         string `yaml:"level" schema:"enum=debug|info"`
	Skipped       string `yaml:"-"`
}

func TestJSONSchema(t *testing.T) {
	describe := func(owner reflect.Type, f reflect.StructField, key string) string {
		return owner.Name() + "." + f.Name + " as " + key
	}
	got, err := JSONSchema(&schemaConfig{}, &SchemaOptions{Describe: describe})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "type": "object",
  "properties": {
    "server": {
      "type": "object",
      "properties": {
        "listen": {
          "type": "string",
          "description": ".Listen as listen"
        },
        "timeout": {
          "type": "string",
          "description": ".Timeout as timeout",
          "pattern": "` + jsonEscape(DurationPattern) + `"
        },
        "addr": {
          "type": "string",
          "description": ".Addr as addr"
        },
        "debug": {
          "type": "boolean",
          "description": ".Debug as debug"
        },
        "bytes": {
          "type": "integer",
          "description": ".Bytes as bytes",
          "minimum": 0
        },
        "workers": {
          "type": "integer",
          "description": ".Workers as workers",
          "minimum": 0
        },
        "ratio": {
          "type": "number",
          "description": ".Ratio as ratio",
          "minimum": 0.5
        }
      },
      "description": "schemaConfig.Server as server",
      "additionalProperties": false
    },
    "tools": {
      "type": "object",
      "properties": {
        "sets": {
          "type": "array",
          "items": {
            "type": "string",
            "enum": [
              "core",
              "extra"
            ]
          },
          "description": ".Sets as sets",
          "uniqueItems": true
        },
        "base_url": {
          "type": "string",
          "description": ".BaseURL as base_url",
          "pattern": "^(https?://.*)?$"
        }
      },
      "description": "schemaConfig.Tools as tools",
      "additionalProperties": false
    },
    "origins": {
      "type": "array",
      "items": {
        "type": "string",
        "pattern": "^https?://[^/]+$"
      },
      "description": "schemaConfig.Origins as origins"
    },
    "rules": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "tool": {
            "type": "string",
            "description": "schemaRule.Tool as tool",
            "minLength": 1
          },
          "timeout": {
            "type": "string",
            "description": "schemaRule.Timeout as timeout",
            "pattern": "` + jsonEscape(DurationPattern) + `"
          }
        },
        "required": [
          "tool"
        ],
        "additionalProperties": false
      },
      "description": "schemaConfig.Rules as rules"
    },
    "shared": {
      "type": "string",
      "description": "SchemaInlined.Shared as shared"
    },
    "level": {
      "type": "string",
      "description": "schemaConfig.Level as level",
      "enum": [
        "debug",
        "info"
      ]
    }
  },
  "additionalProperties": false
}`
	if string(b) != want {
		t.Errorf("JSONSchema =\n%s\nwant\n%s", b, want)
	}
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// TestJSONSchemaValidates checks the schema with a real validator: what
// Load accepts passes, and what the schema exists to catch fails.
func TestJSONSchemaValidates(t *testing.T) {
	s, err := JSONSchema(schemaConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		doc     string
		wantErr string // empty: valid
	}{
		{name: "empty", doc: `{}`},
		{name: "everything", doc: `{"server": {"listen": ":80", "timeout": "1h30m", "debug": true, "bytes": 0, "workers": 2, "ratio": 0.5},
			"tools": {"sets": ["core", "extra"], "base_url": "https://x"}, "origins": ["http://a:8080"],
			"rules": [{"tool": "t", "timeout": "5s"}], "shared": "s", "level": "info"}`},
		{name: "durations Go accepts", doc: `{"rules": [{"tool": "a", "timeout": "0"}, {"tool": "b", "timeout": ".5s"}, {"tool": "c", "timeout": "1.5h10µs"}, {"tool": "d", "timeout": "3ns"}]}`},
		{name: "unknown key", doc: `{"server": {"lisen": ":80"}}`, wantErr: "lisen"},
		{name: "unknown key in a list element", doc: `{"rules": [{"tool": "t", "timout": "5s"}]}`, wantErr: "timout"},
		{name: "inlined key under its struct name", doc: `{"SchemaInlined": {}}`, wantErr: "SchemaInlined"},
		{name: "skipped key", doc: `{"Skipped": "x"}`, wantErr: "Skipped"},
		{name: "bare number as duration", doc: `{"server": {"timeout": "10"}}`, wantErr: "timeout"},
		{name: "negative duration", doc: `{"server": {"timeout": "-5s"}}`, wantErr: "timeout"},
		{name: "duration as number", doc: `{"server": {"timeout": 10}}`, wantErr: "timeout"},
		{name: "value outside enum", doc: `{"level": "verbose"}`, wantErr: "level"},
		{name: "list item outside enum", doc: `{"tools": {"sets": ["core", "other"]}}`, wantErr: "sets"},
		{name: "duplicate list item", doc: `{"tools": {"sets": ["core", "core"]}}`, wantErr: "sets"},
		{name: "url without scheme", doc: `{"tools": {"base_url": "example.com"}}`, wantErr: "base_url"},
		{name: "origin with a path", doc: `{"origins": ["https://a/b"]}`, wantErr: "origins"},
		{name: "required key missing", doc: `{"rules": [{"timeout": "5s"}]}`, wantErr: "tool"},
		{name: "required string empty", doc: `{"rules": [{"tool": ""}]}`, wantErr: "tool"},
		{name: "below minimum", doc: `{"server": {"bytes": -1}}`, wantErr: "bytes"},
		{name: "unsigned below zero", doc: `{"server": {"workers": -1}}`, wantErr: "workers"},
		{name: "fraction for an integer", doc: `{"server": {"bytes": 1.5}}`, wantErr: "bytes"},
		{name: "string for a bool", doc: `{"server": {"debug": "yes"}}`, wantErr: "debug"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v any
			if err := json.Unmarshal([]byte(tt.doc), &v); err != nil {
				t.Fatal(err)
			}
			err := resolved.Validate(v)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Errorf("Validate accepted %s", tt.doc)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("Validate: %v, want it to mention %q", err, tt.wantErr)
			}
		})
	}
}

func TestJSONSchemaErrors(t *testing.T) {
	tests := []struct {
		name    string
		dst     any
		wantErr string
	}{
		{name: "not a struct", dst: 3, wantErr: "needs a struct"},
		{name: "nil", dst: nil, wantErr: "needs a struct"},
		{name: "unsupported type", dst: struct {
			M map[string][]string `yaml:"m"`
		}{}, wantErr: "unsupported field type"},
		{name: "unknown option", dst: struct {
			S string `yaml:"s" schema:"enums=a"`
		}{}, wantErr: `unknown schema option "enums=a"`},
		{name: "enum on a number", dst: struct {
			N int `yaml:"n" schema:"enum=1|2"`
		}{}, wantErr: "needs a string"},
		{name: "url on a duration", dst: struct {
			D time.Duration `yaml:"d" schema:"url"`
		}{}, wantErr: "needs a string"},
		{name: "min on a string", dst: struct {
			S string `yaml:"s" schema:"min=0"`
		}{}, wantErr: "needs a number"},
		{name: "unique on a string", dst: struct {
			S string `yaml:"s" schema:"unique"`
		}{}, wantErr: "needs a list"},
		{name: "self through a slice", dst: schemaTree{}, wantErr: "contains itself"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := JSONSchema(tt.dst, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("JSONSchema: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

type schemaTree struct {
	Children []schemaTree `yaml:"children"`
}

// TestJSONSchemaKeys checks that the schema and Keys walk a type alike:
// every key Keys lists is a property at its path.
func TestJSONSchemaKeys(t *testing.T) {
	s, err := JSONSchema(&testConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range Keys(&testConfig{}, "X_") {
		p := s
		for name := range strings.SplitSeq(k.Path, ".") {
			p = p.Properties[name]
			if p == nil {
				t.Errorf("key %s is not in the schema", k.Path)
				break
			}
		}
	}
}

func TestSchemaEnum(t *testing.T) {
	type fields struct {
		Level string `yaml:"level" schema:"required,enum=debug|info"`
		Plain string `yaml:"plain" schema:"url"`
	}
	typ := reflect.TypeFor[fields]()
	if got := SchemaEnum(typ.Field(0)); !reflect.DeepEqual(got, []string{"debug", "info"}) {
		t.Errorf("SchemaEnum(Level) = %v", got)
	}
	if got := SchemaEnum(typ.Field(1)); got != nil {
		t.Errorf("SchemaEnum(Plain) = %v, want nil", got)
	}
}
