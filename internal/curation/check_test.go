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

// testSources have the three toolsets, core and declared among them
// enabled, and the upstream github, whose items /mcp names with the
// prefix "github_".
var testSources = Sources{
	Toolsets:  []string{"core", "workshop", "conformance"},
	Enabled:   []string{"core", "conformance"},
	Upstreams: map[string]func(string) string{"github": func(n string) string { return "github_" + n }},
}

// TestCheck: each static problem is reported at its key, relative to the
// exposure, with the words of the configuration's check (the servers
// tests of the root package hold them to the whole list).
func TestCheck(t *testing.T) {
	tests := []struct {
		name     string
		exposure Exposure
		want     []string // keys, and the message of the first
		message  string
	}{
		{name: "a good exposure", exposure: Exposure{
			Tools: []ToolSelection{
				{Source: "core", Name: "*"},
				{Source: "github", Name: "search_*"},
				{Source: "github", Name: "search_code", ExposeAs: "find_code", FixedArguments: values("org", `"acme"`),
					Arguments: map[string]Argument{"q": {Description: "what", Default: json.RawMessage(`"x"`)}}},
				{Source: "program", Name: "invoice"},
			},
			Resources: []ResourceSelection{{Source: "declared", URI: "file:///handbook", ExposeAs: "Handbook"}, {Source: "conformance", URI: "test://*"}},
			Prompts:   []PromptSelection{{Source: "github", Name: "review", ExposeAs: "review_pr"}},
		}},
		{name: "no source", exposure: Exposure{Tools: []ToolSelection{{Name: "x"}}, Resources: []ResourceSelection{{}}, Prompts: []PromptSelection{{Name: "*"}}},
			want:    []string{"tools[0].source", "resources[0].source", "prompts[0].source"},
			message: "required: a toolset (core, workshop, conformance), declared, program, or an upstream's name"},
		{name: "unknown source", exposure: Exposure{Tools: []ToolSelection{{Source: "gihub", Name: "*"}}},
			want: []string{"tools[0].source"}, message: `unknown source "gihub": want one of conformance, core, declared, github, program, workshop`},
		{name: "a toolset not enabled", exposure: Exposure{Tools: []ToolSelection{{Source: "workshop", Name: "*"}}},
			want: []string{"tools[0].source"}, message: "the workshop toolset is not enabled: add it to tools.toolsets"},
		{name: "a malformed pattern", exposure: Exposure{Tools: []ToolSelection{{Source: "core", Name: "[a"}}},
			want: []string{"tools[0].name"}, message: `bad pattern "[a"`},
		{name: "curation of a pattern", exposure: Exposure{
			Tools: []ToolSelection{{Source: "core", Name: "e*", ExposeAs: "x", Title: "t", Description: "d", Annotations: Annotations{ReadOnlyHint: new(true)},
				Arguments: map[string]Argument{"a": {}}, FixedArguments: values("b", `1`)}},
			Resources: []ResourceSelection{{Source: "declared", Description: "d"}},
			Prompts:   []PromptSelection{{Source: "declared", Name: "p?", ExposeAs: "p"}},
		}, want: []string{"tools[0].expose_as", "tools[0].title", "tools[0].description", "tools[0].annotations", "tools[0].arguments",
			"tools[0].fixed_arguments", "resources[0].description", "prompts[0].expose_as"},
			message: `applies to one tool, but name "e*" is a pattern`},
		{name: "invalid exposed names", exposure: Exposure{
			Tools:     []ToolSelection{{Source: "core", Name: "echo", ExposeAs: "say it"}},
			Resources: []ResourceSelection{{Source: "declared", URI: "file:///a", ExposeAs: " "}},
			Prompts:   []PromptSelection{{Source: "declared", Name: "p", ExposeAs: strings.Repeat("p", 129)}},
		}, want: []string{"tools[0].expose_as", "resources[0].expose_as", "prompts[0].expose_as"},
			message: `"say it" must be 1 to 128 letters, digits, '_', '-' or '.'`},
		{name: "two selections exposing one name", exposure: Exposure{
			Tools:   []ToolSelection{{Source: "github", Name: "search"}, {Source: "core", Name: "echo", ExposeAs: "github_search"}, {Source: "core", Name: "echo"}, {Source: "core", Name: "echo"}},
			Prompts: []PromptSelection{{Source: "declared", Name: "a", ExposeAs: "b"}, {Source: "declared", Name: "b"}},
		}, want: []string{"tools[1].expose_as", "tools[3].name", "prompts[1].name"},
			message: `the server would expose two tools named "github_search" (tools[0] exposes one)`},
		{name: "arguments", exposure: Exposure{
			Tools: []ToolSelection{{Source: "core", Name: "echo",
				FixedArguments: values("a", `1`, "b", `{`, "Region", `"eu"`, "region", `"us"`, "", `2`),
				Arguments: map[string]Argument{"a": {Description: "d"}, "c": {Default: json.RawMessage(`x`)}, "d": {},
					"Limit": {Default: json.RawMessage(`1`)}, "limit": {Default: json.RawMessage(`2`)}, " ": {Description: "d"}}}},
		}, want: []string{"tools[0].arguments. ", "tools[0].arguments.a", "tools[0].arguments.c.default", "tools[0].arguments.d",
			"tools[0].arguments.limit", "tools[0].fixed_arguments.", "tools[0].fixed_arguments.b", "tools[0].fixed_arguments.region"},
			message: "an argument needs a name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.exposure.Check(testSources)
			if !reflect.DeepEqual(keys(got), tt.want) {
				t.Errorf("Check keys = %q, want %q\n%v", keys(got), tt.want, got)
			}
			if len(got) > 0 && got[0].Message != tt.message {
				t.Errorf("Check's first problem says %q, want %q", got[0].Message, tt.message)
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
			FixedArguments: values("region", `"eu"`, "unit", `"f"`, "any", `[1]`),
			Arguments:      map[string]Argument{"count": {Description: "how many", Default: json.RawMessage(`3`)}},
		}},
		{name: "arguments the tool does not have", sel: ToolSelection{
			FixedArguments: values("zone", `"a"`),
			Arguments:      map[string]Argument{"Region": {Description: "case matters"}},
		}, want: []string{"fixed_arguments.zone", "arguments.Region"}},
		{name: "values the schema refuses", sel: ToolSelection{
			FixedArguments: values("region", `"asia"`, "unit", `"k"`, "none", `1`),
			Arguments:      map[string]Argument{"count": {Default: json.RawMessage(`0`)}},
		}, want: []string{"fixed_arguments.none", "fixed_arguments.region", "fixed_arguments.unit", "arguments.count.default"}},
		{name: "a value whose schema refers outside it is not checked", sel: ToolSelection{
			FixedArguments: values("other", `2`),
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
	sel := ToolSelection{FixedArguments: values("region", `"asia"`, "zone", `1`)}
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
	none := ToolSelection{FixedArguments: values("a", `1`)}
	if got := none.CheckSchema(json.RawMessage(`{"type":"object"}`)); len(got) != 1 || !strings.Contains(got[0].Message, "takes no arguments") {
		t.Errorf("CheckSchema of a tool without arguments = %v", got)
	}
}
