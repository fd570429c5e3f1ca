package curation

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// keys returns the keys of ps, warnings marked with a trailing "!".
func keys(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		k := p.Key
		if p.Warning {
			k += "!"
		}
		out = append(out, k)
	}
	return out
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		view View
		want []string
	}{
		{name: "a good view", view: View{
			Tools: []ToolSelection{
				{Source: "core"},
				{Source: "github", Name: "search_*"},
				{Source: "github", Name: "search_code", ExposeAs: "find_code", FixedArguments: map[string]any{"org": "acme"},
					Arguments: map[string]Argument{"q": {Description: "what", Default: "x"}}},
			},
			Resources: []ResourceSelection{{Source: "declared", URI: "file:///handbook", ExposeAs: "Handbook"}, {Source: "conformance", URI: "test://*"}},
			Prompts:   []PromptSelection{{Source: "github", Name: "review", ExposeAs: "review_pr"}},
		}},
		{name: "no source", view: View{Tools: []ToolSelection{{Name: "x"}}, Resources: []ResourceSelection{{}}, Prompts: []PromptSelection{{}}},
			want: []string{"tools[0].source", "resources[0].source", "prompts[0].source"}},
		{name: "a malformed pattern", view: View{Tools: []ToolSelection{{Source: "core", Name: "[a"}}},
			want: []string{"tools[0].name"}},
		{name: "curation of a pattern", view: View{
			Tools: []ToolSelection{{Source: "core", Name: "e*", ExposeAs: "x", Title: "t", Description: "d", Annotations: &Annotations{},
				Arguments: map[string]Argument{"a": {}}, FixedArguments: map[string]any{"b": 1}}},
			Resources: []ResourceSelection{{Source: "declared", Description: "d"}},
			Prompts:   []PromptSelection{{Source: "declared", Name: "p?", ExposeAs: "p"}},
		}, want: []string{"tools[0].annotations", "tools[0].arguments", "tools[0].description", "tools[0].expose_as",
			"tools[0].fixed_arguments", "tools[0].title", "resources[0].description", "prompts[0].expose_as"}},
		{name: "invalid exposed names", view: View{
			Tools:   []ToolSelection{{Source: "core", Name: "echo", ExposeAs: "say it"}},
			Prompts: []PromptSelection{{Source: "declared", Name: "p", ExposeAs: strings.Repeat("p", 129)}},
		}, want: []string{"tools[0].expose_as", "prompts[0].expose_as"}},
		{name: "an argument fixed and described; values that are not JSON", view: View{
			Tools: []ToolSelection{{Source: "core", Name: "echo",
				FixedArguments: map[string]any{"a": 1, "b": func() {}},
				Arguments:      map[string]Argument{"a": {Description: "d"}, "c": {Default: make(chan int)}}}},
		}, want: []string{"tools[0].fixed_arguments.b", "tools[0].arguments.a", "tools[0].arguments.c.default"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.view.Check()
			if !reflect.DeepEqual(keys(got), tt.want) {
				t.Errorf("Check keys = %q, want %q\n%v", keys(got), tt.want, got)
			}
		})
	}
}

func TestCheckSchema(t *testing.T) {
	const schema = `{
		"type": "object",
		"$defs": {"unit": {"type": "string", "enum": ["c", "f"]}},
		"properties": {
			"region": {"type": "string", "enum": ["eu", "us"]},
			"unit": {"$ref": "#/$defs/unit"},
			"count": {"type": "integer", "minimum": 1},
			"other": {"$ref": "#/properties/count"},
			"any": true,
			"none": false
		}
	}`
	tests := []struct {
		name string
		sel  ToolSelection
		want []string
	}{
		{name: "good values", sel: ToolSelection{
			FixedArguments: map[string]any{"region": "eu", "unit": "f", "any": []any{1}},
			Arguments:      map[string]Argument{"count": {Description: "how many", Default: 3}},
		}},
		{name: "arguments the tool does not have", sel: ToolSelection{
			FixedArguments: map[string]any{"zone": "a"},
			Arguments:      map[string]Argument{"Region": {Description: "case matters"}},
		}, want: []string{"fixed_arguments.zone", "arguments.Region"}},
		{name: "values the schema refuses", sel: ToolSelection{
			FixedArguments: map[string]any{"region": "asia", "unit": "k", "none": 1},
			Arguments:      map[string]Argument{"count": {Default: 0}},
		}, want: []string{"fixed_arguments.none", "fixed_arguments.region", "fixed_arguments.unit", "arguments.count.default"}},
		{name: "a value whose schema refers outside it is not checked", sel: ToolSelection{
			FixedArguments: map[string]any{"other": 2},
		}, want: []string{"fixed_arguments.other!"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.sel.CheckSchema(json.RawMessage(schema))
			if !reflect.DeepEqual(keys(got), tt.want) {
				t.Errorf("CheckSchema keys = %q, want %q\n%v", keys(got), tt.want, got)
			}
		})
	}
}

func TestCheckSchemaMessages(t *testing.T) {
	sel := ToolSelection{FixedArguments: map[string]any{"region": "asia", "zone": 1}}
	got := sel.CheckSchema(json.RawMessage(`{"type":"object","properties":{"region":{"enum":["eu"]},"q":{}}}`))
	want := []string{
		`fixed_arguments.region: the argument's schema refuses the value "asia"`,
		`fixed_arguments.zone: the tool has no argument "zone" (it takes region, q)`,
	}
	if len(got) != len(want) {
		t.Fatalf("CheckSchema = %v, want %d problems", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i].Error(), w) {
			t.Errorf("problem %d = %q, want it to start %q", i, got[i].Error(), w)
		}
	}
	none := ToolSelection{FixedArguments: map[string]any{"a": 1}}
	if got := none.CheckSchema(json.RawMessage(`{"type":"object"}`)); len(got) != 1 || !strings.Contains(got[0].Message, "takes no arguments") {
		t.Errorf("CheckSchema of a tool without arguments = %v", got)
	}
}
