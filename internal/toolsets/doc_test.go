package toolsets

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/internal/catalog"
)

// The tool of the package doc's "Adding a tool", as written there.

type greetInput struct {
	Name string `json:"name" jsonschema:"Who to greet."`
}

type greetOutput struct {
	Greeting string `json:"greeting" jsonschema:"The greeting."`
}

func greetTool() catalog.Tool {
	return catalog.NewTool(&sdk.Tool{
		Name:  "greet",
		Title: "Greet someone",
		Description: "Returns a greeting for the given name. Call this when " +
			"the user asks to be greeted; not for other messages.",
		InputSchema: schemaFor[greetInput](func(p map[string]*jsonschema.Schema) {
			p["name"].MaxLength = ptr(100) // what tags cannot say: bounds, enums
		}),
		Annotations: readOnly("Greet someone", false),
	}, func(ctx context.Context, req *sdk.CallToolRequest, in greetInput) (*sdk.CallToolResult, greetOutput, error) {
		if in.Name == "" {
			return nil, greetOutput{}, errors.New("name is empty; ask the user who to greet")
		}
		return nil, greetOutput{Greeting: "Hello, " + in.Name}, nil
	})
}

// TestDocAddingATool checks that the package doc's example tool is the one
// above, word for word, and that it works as the doc says.
func TestDocAddingATool(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var snippet []string
	for line := range strings.Lines(string(doc)) {
		if code, ok := strings.CutPrefix(line, "//\t"); ok {
			snippet = append(snippet, code)
		} else if line == "//\n" && len(snippet) > 0 {
			snippet = append(snippet, "\n")
		}
	}
	src, err := os.ReadFile("doc_test.go")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(strings.Join(snippet, ""))
	if want == "" || !strings.Contains(string(src), want+"\n") {
		t.Fatalf("doc.go's tool is not the one in doc_test.go:\n%s", want)
	}

	c, err := New(Options{}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	c.Add(greetTool())
	cs, _ := connect(t, c, nil)
	for _, tt := range []struct {
		name    string
		args    map[string]any
		want    string
		isError bool
	}{
		{name: "a name", args: map[string]any{"name": "Ada"}, want: `{"greeting":"Hello, Ada"}`},
		{name: "no name", args: map[string]any{"name": ""}, want: "name is empty; ask the user who to greet", isError: true},
		{name: "too long", args: map[string]any{"name": strings.Repeat("a", 101)}, isError: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "greet", Arguments: tt.args})
			if err != nil {
				t.Fatal(err)
			}
			text := res.Content[0].(*sdk.TextContent).Text
			if res.IsError != tt.isError || (tt.want != "" && text != tt.want) {
				t.Errorf("IsError %v %q, want %v %q", res.IsError, text, tt.isError, tt.want)
			}
		})
	}
}

// TestDocToolsetList checks that the package doc's "# Toolsets" list names
// exactly the tools of the core and workshop toolsets, in their order
// (the conformance toolset is described, not listed).
func TestDocToolsetList(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{} // toolset → the names the doc lists
	for line := range strings.Lines(string(doc)) {
		item, ok := strings.CutPrefix(strings.TrimSpace(line), "//   - ")
		if !ok {
			continue
		}
		head, names, ok := strings.Cut(item, ": ")
		if !ok {
			continue
		}
		set, _, _ := strings.Cut(head, " ")
		// "weather (Open-Meteo)": a remark in brackets is not a name.
		names = regexp.MustCompile(` \([^)]*\)`).ReplaceAllString(names, "")
		listed[set] = strings.TrimSuffix(strings.TrimSpace(names), ".")
	}
	deps := Deps{}.withDefaults()
	for _, tt := range []struct {
		name  string
		tools []catalog.Tool
	}{
		{name: ToolsetCore, tools: coreTools(deps)},
		{name: ToolsetWorkshop, tools: workshopTools(WeatherOptions{}, deps)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var names []string
			for _, tool := range tt.tools {
				names = append(names, tool.Name)
			}
			if got, want := listed[tt.name], strings.Join(names, ", "); got != want {
				t.Errorf("doc.go lists %s as %q, want %q", tt.name, got, want)
			}
		})
	}
}
