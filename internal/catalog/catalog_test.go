package catalog

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestEncodedInputSchema(t *testing.T) {
	type echoInput struct {
		Text string `json:"text" jsonschema:"what to echo"`
	}
	schema, err := jsonschema.For[echoInput](nil)
	if err != nil {
		t.Fatal(err)
	}
	limit := 3
	schema.Properties["text"].MaxLength = &limit
	want, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	raw := json.RawMessage(`{"type":"object"}`)
	tests := []struct {
		name   string
		schema any
		want   any
	}{
		{name: "a schema is encoded", schema: schema, want: json.RawMessage(want)},
		{name: "JSON is kept", schema: raw, want: raw},
		{name: "none is left to the SDK", schema: nil, want: nil},
		{name: "a nil schema is left to the SDK", schema: (*jsonschema.Schema)(nil), want: (*jsonschema.Schema)(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &sdk.Tool{Name: "echo", Title: "Echo", InputSchema: tt.schema}
			got := encodedInputSchema(in)
			if !reflect.DeepEqual(got.InputSchema, tt.want) {
				t.Errorf("InputSchema = %#v, want %#v", got.InputSchema, tt.want)
			}
			if got.Name != "echo" || got.Title != "Echo" {
				t.Errorf("tool = %+v, want the other fields kept", got)
			}
			if !reflect.DeepEqual(in.InputSchema, tt.schema) {
				t.Errorf("the caller's tool was changed: %#v", in.InputSchema)
			}
		})
	}
}

// NoSession holds for the catalog's own tools that say so and bind no
// argument to a header, and for nothing else.
func TestNoSession(t *testing.T) {
	handler := func(context.Context, *sdk.CallToolRequest, any) (*sdk.CallToolResult, any, error) {
		return nil, nil, nil
	}
	mark := func(tl Tool) Tool { tl.NoSession = true; return tl }
	c := New(nil)
	c.Add(
		mark(NewTool(&sdk.Tool{Name: "plain"}, handler)),
		mark(NewTool(&sdk.Tool{Name: "bound", InputSchema: json.RawMessage(`{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"R"}}}`)}, handler)),
		NewTool(&sdk.Tool{Name: "unmarked"}, handler),
	)
	if _, err := c.SetSource("up", Set{Tools: []SetTool{{
		Tool:    &sdk.Tool{Name: "upstream", InputSchema: json.RawMessage(`{"type":"object"}`)},
		Handler: func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return nil, nil },
	}}}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"plain": true, "bound": false, "unmarked": false, "upstream": false, "missing": false} {
		if got := c.NoSession(name); got != want {
			t.Errorf("NoSession(%q) = %v, want %v", name, got, want)
		}
	}
}
