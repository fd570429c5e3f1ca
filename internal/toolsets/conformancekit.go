//lint:file-ignore SA1019 the conformance tools ask for sampling, which the 2026-07-28 revision deprecates

package toolsets

import (
	"context"
	"encoding/base64"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// What the conformance tools are made of: their descriptions, plain
// replies, and the requests and answers of multi round-trip calls.

func mustBase64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic("tools: bad embedded media: " + err.Error())
	}
	return b
}

// conformanceTool describes a conformance tool; the annotations say it only
// reads unless mutates is set.
func conformanceTool(name, title, description string) *sdk.Tool {
	return &sdk.Tool{
		Name:        name,
		Title:       "Conformance: " + title,
		Description: description + " Part of the MCP conformance test suite; not for general use.",
		Annotations: readOnly("Conformance: "+title, false),
	}
}

// reply is a handler that returns fixed content.
func reply(content ...sdk.Content) sdk.ToolHandlerFor[any, any] {
	return func(context.Context, *sdk.CallToolRequest, any) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: content}, nil, nil
	}
}

// accepted returns the content of the elicitation response under key, if
// the user accepted it.
func accepted(responses sdk.InputResponseMap, key string) map[string]any {
	if r, ok := responses[key].(*sdk.ElicitResult); ok && r != nil && r.Action == "accept" {
		return r.Content
	}
	return nil
}

// sampled returns the first text of the sampling response under key.
func sampled(responses sdk.InputResponseMap, key string) (string, bool) {
	r, ok := responses[key].(*sdk.CreateMessageWithToolsResult)
	if !ok || r == nil {
		return "", false
	}
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			return tc.Text, true
		}
	}
	return "(non-text response)", true
}

func askName(message string) *sdk.ElicitParams {
	return &sdk.ElicitParams{Message: message, RequestedSchema: objectOf("name", "string")}
}

func ask(prompt string, maxTokens int64) *sdk.CreateMessageParams {
	return &sdk.CreateMessageParams{
		Messages:  []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: prompt}}},
		MaxTokens: maxTokens,
	}
}

// objectOf is an object schema with one required property.
func objectOf(prop, typ string) *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:       "object",
		Properties: map[string]*jsonschema.Schema{prop: {Type: typ}},
		Required:   []string{prop},
	}
}
