package curation

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// resolves fails t unless schema is a JSON Schema 2020-12 that
// jsonschema-go (the SDK's) accepts, defaults included.
func resolves(t *testing.T, schema json.RawMessage) {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatalf("curated schema does not decode: %v\n%s", err, schema)
	}
	if _, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
		t.Fatalf("curated schema is not valid JSON Schema: %v\n%s", err, schema)
	}
}

func compact(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return b.String()
}

func TestSchema(t *testing.T) {
	const weather = `{
		"type": "object",
		"$defs": {"unit": {"type": "string", "enum": ["c", "f"]}},
		"properties": {
			"city": {"type": "string", "description": "the city"},
			"region": {"type": "string", "x-mcp-header": "Region"},
			"unit": {"$ref": "#/$defs/unit"},
			"verbose": true
		},
		"required": ["city", "region"],
		"dependentRequired": {"region": ["city"], "unit": ["region", "city"]},
		"additionalProperties": false,
		"x-vendor": {"kept": 1}
	}`
	tests := []struct {
		name   string
		schema string
		sel    ToolSelection
		want   string
	}{
		{
			name:   "a fixed argument leaves properties, required and dependentRequired; the rest keeps its order",
			schema: weather,
			sel:    ToolSelection{FixedArguments: values("region", `"eu"`)},
			want: `{"type":"object","$defs":{"unit":{"type":"string","enum":["c","f"]}},
				"properties":{"city":{"type":"string","description":"the city"},"unit":{"$ref":"#/$defs/unit"},"verbose":true},
				"required":["city"],"dependentRequired":{"unit":["city"]},"additionalProperties":false,"x-vendor":{"kept":1}}`,
		},
		{
			name:   "fixing every required argument drops required",
			schema: `{"type":"object","properties":{"a":{"type":"integer"},"b":{}},"required":["a"]}`,
			sel:    ToolSelection{FixedArguments: values("a", `1`)},
			want:   `{"type":"object","properties":{"b":{}}}`,
		},
		{
			name:   "descriptions and defaults are set, replacing the tool's",
			schema: weather,
			sel: ToolSelection{Arguments: map[string]Argument{
				"city":    {Description: "Which city, in English"},
				"unit":    {Default: json.RawMessage(`"c"`)},
				"verbose": {Description: "Say more", Default: json.RawMessage(`false`)},
			}},
			want: `{"type":"object","$defs":{"unit":{"type":"string","enum":["c","f"]}},
				"properties":{"city":{"type":"string","description":"Which city, in English"},"region":{"type":"string","x-mcp-header":"Region"},
				"unit":{"$ref":"#/$defs/unit","default":"c"},"verbose":{"description":"Say more","default":false}},
				"required":["city","region"],"dependentRequired":{"region":["city"],"unit":["region","city"]},"additionalProperties":false,"x-vendor":{"kept":1}}`,
		},
		{
			name:   "a false property schema stays one that allows nothing",
			schema: `{"type":"object","properties":{"never":false}}`,
			sel:    ToolSelection{Arguments: map[string]Argument{"never": {Description: "unused"}}},
			want:   `{"type":"object","properties":{"never":{"not":{},"description":"unused"}}}`,
		},
		{
			name:   "a schema without properties is kept",
			schema: `{"type":"object"}`,
			sel:    ToolSelection{FixedArguments: values("a", `1`)},
			want:   `{"type":"object"}`,
		},
		{
			name:   "a structured default",
			schema: `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}}}}`,
			sel:    ToolSelection{Arguments: map[string]Argument{"tags": {Default: json.RawMessage(`["a", "b"]`)}}},
			want:   `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"default":["a","b"]}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Schema(json.RawMessage(tt.schema), &tt.sel)
			if err != nil {
				t.Fatal(err)
			}
			if want := compact(t, tt.want); string(got) != want {
				t.Errorf("Schema =\n%s\nwant\n%s", got, want)
			}
			resolves(t, got)
		})
	}
}

func TestSchemaRefuses(t *testing.T) {
	sel := &ToolSelection{FixedArguments: values("a", `1`)}
	tests := []struct {
		name   string
		schema any
	}{
		{name: "not an object", schema: json.RawMessage(`true`)},
		{name: "a key twice", schema: json.RawMessage(`{"type":"object","properties":{},"properties":{"a":{}}}`)},
		{name: "properties not an object", schema: json.RawMessage(`{"type":"object","properties":[]}`)},
		{name: "trailing data", schema: json.RawMessage(`{"type":"object"} {}`)},
		{name: "not JSON", schema: func() {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := Schema(tt.schema, sel); err == nil {
				t.Errorf("Schema = %s, want an error", got)
			}
		})
	}
}

// TestSchemaOfAStruct shows that a schema the SDK infers (a
// *jsonschema.Schema) is curated as its JSON.
func TestSchemaOfAStruct(t *testing.T) {
	type in struct {
		City   string `json:"city"`
		Region string `json:"region"`
	}
	s, err := jsonschema.For[in](nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Schema(s, &ToolSelection{FixedArguments: values("region", `"eu"`)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`
	if string(got) != want {
		t.Errorf("Schema = %s, want %s", got, want)
	}
	resolves(t, got)
}

func TestTool(t *testing.T) {
	yes, no := true, false
	orig := &sdk.Tool{
		Name: "gh_search", Title: "Search", Description: "Searches.",
		Annotations:  &sdk.ToolAnnotations{Title: "Search", ReadOnlyHint: true, OpenWorldHint: &yes},
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"},"org":{"type":"string"}},"required":["q","org"]}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"org":{"type":"string"}}}`),
		Meta:         sdk.Meta{"ui": "kept"},
	}
	keep := *orig
	keepAnn := *orig.Annotations
	tests := []struct {
		name string
		sel  ToolSelection
		want sdk.Tool
	}{
		{
			name: "nothing curated",
			sel:  ToolSelection{Name: "search"},
			want: *orig,
		},
		{
			name: "renamed, titled, described, hinted",
			sel: ToolSelection{ExposeAs: "find_code", Title: "Find code", Description: "Finds code in our org.",
				Annotations: Annotations{ReadOnlyHint: &no, DestructiveHint: &no}},
			want: sdk.Tool{Name: "find_code", Title: "Find code", Description: "Finds code in our org.",
				Annotations:  &sdk.ToolAnnotations{Title: "Find code", ReadOnlyHint: false, DestructiveHint: &no, OpenWorldHint: &yes},
				InputSchema:  orig.InputSchema,
				OutputSchema: orig.OutputSchema, Meta: orig.Meta},
		},
		{
			name: "a fixed argument changes the input schema, not the output schema",
			sel:  ToolSelection{FixedArguments: values("org", `"acme"`)},
			want: sdk.Tool{Name: "gh_search", Title: "Search", Description: "Searches.", Annotations: orig.Annotations,
				InputSchema:  json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`),
				OutputSchema: orig.OutputSchema, Meta: orig.Meta},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Tool(orig, &tt.sel)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("Tool =\n%+v\nwant\n%+v", *got, tt.want)
			}
			if !reflect.DeepEqual(*orig, keep) || !reflect.DeepEqual(*orig.Annotations, keepAnn) {
				t.Errorf("the tool was changed: %+v", orig)
			}
		})
	}
}

func TestPromptAndResource(t *testing.T) {
	p := Prompt(&sdk.Prompt{Name: "gh_review", Title: "Review", Description: "d", Arguments: []*sdk.PromptArgument{{Name: "pr"}}},
		&PromptSelection{ExposeAs: "review", Description: "Review a PR of ours"})
	if p.Name != "review" || p.Title != "Review" || p.Description != "Review a PR of ours" || len(p.Arguments) != 1 {
		t.Errorf("Prompt = %+v", p)
	}
	r := Resource(&sdk.Resource{URI: "file:///a", Name: "a", MIMEType: "text/plain"}, &ResourceSelection{ExposeAs: "handbook", Title: "Handbook"})
	if r.URI != "file:///a" || r.Name != "handbook" || r.Title != "Handbook" || r.MIMEType != "text/plain" {
		t.Errorf("Resource = %+v", r)
	}
	tm := Template(&sdk.ResourceTemplate{URITemplate: "file:///{x}", Name: "x"}, &ResourceSelection{Description: "Files"})
	if tm.URITemplate != "file:///{x}" || tm.Name != "x" || tm.Description != "Files" {
		t.Errorf("Template = %+v", tm)
	}
}
