package config

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

type mapArgument struct {
	Description string          `yaml:"description"`
	Default     json.RawMessage `yaml:"default"`
}

type mapSelection struct {
	Name      string                     `yaml:"name"`
	Arguments map[string]mapArgument     `yaml:"arguments"`
	Fixed     map[string]json.RawMessage `yaml:"fixed"`
}

type mapConfig struct {
	Labels     map[string]string `yaml:"labels"`
	Value      json.RawMessage   `yaml:"value"`
	Selections []mapSelection    `yaml:"selections"`
}

// TestLoadMapsAndJSON: a map is a mapping of names; a JSON value takes
// whatever the YAML holds, as JSON, with YAML's own types (timestamps,
// binary, hex integers) turned into what JSON can say.
func TestLoadMapsAndJSON(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want mapConfig
	}{
		{
			name: "map of scalars",
			yaml: "labels:\n  team: data\n  tier: \"1\"\n",
			want: mapConfig{Labels: map[string]string{"team": "data", "tier": "1"}},
		},
		{
			name: "map of structs in a list",
			yaml: "selections:\n  - name: query\n    arguments:\n      limit: {description: Rows to return., default: 100}\n      sql: {description: The query.}\n",
			want: mapConfig{Selections: []mapSelection{{Name: "query", Arguments: map[string]mapArgument{
				"limit": {Description: "Rows to return.", Default: json.RawMessage("100")},
				"sql":   {Description: "The query."},
			}}}},
		},
		{
			name: "JSON values of every kind",
			yaml: "selections:\n  - fixed:\n      s: text\n      q: \"true\"\n      b: true\n      i: -3\n      h: 0x10\n      f: 2.5\n      e: 1e3\n      n: null\n      empty:\n      day: 2025-01-31\n      bin: !!binary aGk=\n      list: [1, two, {three: 3}]\n      obj: {b: 1, a: [x]}\n",
			want: mapConfig{Selections: []mapSelection{{Fixed: map[string]json.RawMessage{
				"s": json.RawMessage(`"text"`), "q": json.RawMessage(`"true"`), "b": json.RawMessage(`true`),
				"i": json.RawMessage(`-3`), "h": json.RawMessage(`16`), "f": json.RawMessage(`2.5`), "e": json.RawMessage(`1000`),
				"n": json.RawMessage(`null`), "empty": json.RawMessage(`null`),
				"day": json.RawMessage(`"2025-01-31"`), "bin": json.RawMessage(`"aGk="`),
				"list": json.RawMessage(`[1,"two",{"three":3}]`),
				"obj":  json.RawMessage(`{"b":1,"a":["x"]}`), // the order written
			}}}},
		},
		{
			name: "a JSON value through an alias",
			yaml: "labels: {}\nvalue: &v {region: eu}\nselections:\n  - fixed: {region: *v}\n",
			want: mapConfig{Labels: map[string]string{}, Value: json.RawMessage(`{"region":"eu"}`),
				Selections: []mapSelection{{Fixed: map[string]json.RawMessage{"region": json.RawMessage(`{"region":"eu"}`)}}}},
		},
		{
			name: "a scalar key is taken as written",
			yaml: "value: {1: one, true: yes}\n",
			want: mapConfig{Value: json.RawMessage(`{"1":"one","true":"yes"}`)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got mapConfig
			if err := Load(&got, []byte(tt.yaml), nil, "P_"); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %s\nwant %s", dump(got), dump(tt.want))
			}
		})
	}
}

func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestLoadMapsAndJSONProblems(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		environ []string
		want    []wantProblem
	}{
		{
			name: "a list where a map is wanted",
			yaml: "labels: [a, b]\n",
			want: []wantProblem{{"labels", "file:1", "expected a mapping of names, got a list"}},
		},
		{
			name: "a duplicate name",
			yaml: "labels:\n  a: x\n  a: y\n",
			want: []wantProblem{{"labels.a", "file:3", "duplicate key; first set on line 2"}},
		},
		{
			name: "a key that is not a string",
			yaml: "labels:\n  ? [a]\n  : x\n",
			want: []wantProblem{{"labels", "file:2", "a key must be a string, not a list"}},
		},
		{
			name: "an unknown key inside an entry is named by the entry",
			yaml: "selections:\n  - arguments:\n      region: {descripton: x}\n",
			want: []wantProblem{{"selections[0].arguments.region.descripton", "file:3", "did you mean selections[0].arguments.region.description?"}},
		},
		{
			name: "a duplicate key inside a JSON value",
			yaml: "selections:\n  - fixed:\n      region: {a: 1, a: 2}\n",
			want: []wantProblem{{"selections[0].fixed.region.a", "file:3", "duplicate key"}},
		},
		{
			name: "infinity is no JSON number",
			yaml: "value: [1, .inf]\n",
			want: []wantProblem{{"value[1]", "file:1", "not a JSON value"}},
		},
		{
			name: "a merge key inside a JSON value",
			yaml: "base: &b {a: 1}\nvalue: {<<: *b}\n",
			want: []wantProblem{
				{"base", "file:1", "unknown key"},
				{"value", "file:2", "merge keys (<<) are not supported"},
			},
		},
		{
			name:    "the environment cannot set a map or a JSON value",
			environ: []string{"P_LABELS=a", "P_VALUE=1"},
			want: []wantProblem{
				{"labels", "env P_LABELS", "only in the config file"},
				{"value", "env P_VALUE", "only in the config file"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg mapConfig
			err := Load(&cfg, []byte(tt.yaml), tt.environ, "P_")
			checkProblems(t, err, tt.want)
		})
	}
}

// TestLoadJSONValueNotSetOnProblem: a JSON value with a problem anywhere
// inside stays unset rather than holding part of what was written.
func TestLoadJSONValueNotSetOnProblem(t *testing.T) {
	var cfg mapConfig
	if err := Load(&cfg, []byte("value: {a: 1, a: 2, b: .nan}\n"), nil, "P_"); err == nil {
		t.Fatal("Load accepted a duplicate key and NaN")
	}
	if cfg.Value != nil {
		t.Errorf("value = %s, want unset", cfg.Value)
	}
}

func TestKeysAndSchemaOfMaps(t *testing.T) {
	if got, want := Keys(&mapConfig{}, "P_"), []Key{{Path: "labels"}, {Path: "value"}, {Path: "selections"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Keys = %v, want %v", got, want)
	}
	s, err := JSONSchema(&mapConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"labels":{"type":"object","additionalProperties":{"type":"string"}}`,
		`"value":true`,
		`"arguments":{"type":"object","additionalProperties":{"type":"object","properties":{"description":{"type":"string"},"default":true},"additionalProperties":false}}`,
		`"fixed":{"type":"object","additionalProperties":true}`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("schema %s\nlacks %s", b, want)
		}
	}
}
