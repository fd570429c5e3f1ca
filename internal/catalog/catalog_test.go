package catalog

import (
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
