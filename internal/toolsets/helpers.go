package toolsets

import (
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// schemaFor infers the JSON Schema of T, as the SDK would, so that a tool can
// add what struct tags cannot say (enums, bounds). It panics if T has no
// schema, which only a programming error causes and every test catches.
func schemaFor[T any](edit func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("tools: schema: %v", err))
	}
	if edit != nil {
		edit(s.Properties)
	}
	return s
}

// emptyObject is the input schema of a tool that takes no arguments.
func emptyObject() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}}
}

func ptr[T any](v T) *T { return &v }

// Annotations shared by most tools.

// readOnly describes a tool that only reads and has no side effects; open
// says whether it reaches outside the server (an upstream API).
func readOnly(title string, open bool) *sdk.ToolAnnotations {
	return &sdk.ToolAnnotations{
		Title:           title,
		ReadOnlyHint:    true,
		DestructiveHint: ptr(false),
		IdempotentHint:  true,
		OpenWorldHint:   ptr(open),
	}
}

// textResult is a result holding one text block.
func textResult(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}
