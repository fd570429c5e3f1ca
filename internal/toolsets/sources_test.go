package toolsets

import (
	"context"
	"reflect"
	"slices"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/curation"
)

// TestSources shows the source of what Add puts in the catalog, as a
// view selects it: each toolset's tools under its name (a tool two
// toolsets share under both), the declared resources and prompts under
// "declared", and what is added afterwards under "program".
func TestSources(t *testing.T) {
	c := newCatalog(t, Options{
		Toolsets:  []string{"core", "workshop", "conformance"},
		Resources: []ResourceSpec{{URI: "docs://handbook", Name: "handbook", Text: "h"}},
		Prompts:   []PromptSpec{{Name: "summarize", Text: "Summarize."}},
	}, Deps{})
	catalog.AddTool(c, &sdk.Tool{Name: "invoice"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{}, nil, nil
	})
	tests := []struct {
		source    string
		tools     []string // all of them, or with some, those
		some      bool
		resources []string
		prompts   []string
	}{
		{source: "core", tools: []string{"PingME", "calculator", "echo", "time", "whoami"}},
		{source: "workshop", tools: []string{"calculator", "country_info", "weather"}},
		{source: "conformance", tools: []string{"test_simple_text", "test_x_mcp_header"}, some: true,
			resources: []string{"test://static-binary", "test://static-text", "test://watched-resource"}, prompts: []string{"test_input_required_result_prompt", "test_prompt_with_arguments", "test_prompt_with_embedded_resource", "test_prompt_with_image", "test_simple_prompt"}},
		{source: curation.SourceDeclared, tools: []string{}, resources: []string{"docs://handbook"}, prompts: []string{"summarize"}},
		{source: curation.SourceProgram, tools: []string{"invoice"}},
	}
	for _, tt := range tests {
		t.Run(tt.source, func(t *testing.T) {
			s := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
			c.RegisterView(s, curation.Exposure{
				Tools:     []curation.ToolSelection{{Source: tt.source}},
				Resources: []curation.ResourceSelection{{Source: tt.source}},
				Prompts:   []curation.PromptSelection{{Source: tt.source}},
			})
			st, ct := sdk.NewInMemoryTransports()
			ss, err := s.Connect(t.Context(), st, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ss.Close()
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, nil).Connect(t.Context(), ct, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			var tools, resources, prompts []string
			for tl, err := range cs.Tools(t.Context(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				tools = append(tools, tl.Name)
			}
			for r, err := range cs.Resources(t.Context(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				resources = append(resources, r.URI)
			}
			for p, err := range cs.Prompts(t.Context(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				prompts = append(prompts, p.Name)
			}
			slices.Sort(tools)
			slices.Sort(resources)
			slices.Sort(prompts)
			switch {
			case tt.some:
				for _, n := range tt.tools {
					if !slices.Contains(tools, n) {
						t.Errorf("tools = %q, want them to include %q", tools, n)
					}
				}
				if slices.Contains(tools, "echo") {
					t.Errorf("tools = %q, want no core tool", tools)
				}
			case !reflect.DeepEqual(tools, nilIfEmpty(tt.tools)):
				t.Errorf("tools = %q, want %q", tools, tt.tools)
			}
			if !reflect.DeepEqual(resources, tt.resources) {
				t.Errorf("resources = %q, want %q", resources, tt.resources)
			}
			if !reflect.DeepEqual(prompts, tt.prompts) {
				t.Errorf("prompts = %q, want %q", prompts, tt.prompts)
			}
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
