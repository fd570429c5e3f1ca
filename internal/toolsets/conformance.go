package toolsets

// This file is the conformance toolset: the tools, resources, prompts and
// completions that the scenarios of the official MCP conformance suite
// (github.com/modelcontextprotocol/conformance) call, as the SDK's
// conformance/everything-server serves them. Texts the scenarios compare are
// kept as the suite expects them. The toolset is off by default: it exists
// to prove the server speaks the protocol, not to be useful to a model.
//
// Several handlers use server-to-client requests (sampling, elicitation,
// roots, logging) that the 2026-07-28 revision deprecates; they remain
// what the scenarios exercise.

//lint:file-ignore SA1019 the conformance scenarios exercise MCP logging, sampling and roots, which the 2026-07-28 revision deprecates

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/yosida95/uritemplate/v3"
)

const (
	watchedResourceURI   = "test://watched-resource"
	watchedInterval      = 3 * time.Second
	conformanceTemplate  = "test://template/{id}/data"
	transientToolName    = "__transient_tool_for_list_changed"
	transientPromptName  = "__transient_prompt_for_list_changed"
	reconnectGracePeriod = 100 * time.Millisecond
)

// A 1×1 red PNG and a silent WAV: the smallest media the content scenarios accept.
var (
	testPNG = mustBase64("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
	testWAV = mustBase64("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=")
)

func conformanceTools(c *catalog.Catalog) []catalog.Tool {
	ts := []catalog.Tool{
		catalog.NewTool(conformanceTool("test_simple_text", "simple text", "Returns one text block."),
			reply(&sdk.TextContent{Text: "This is a simple text response for testing."})),
		catalog.NewTool(conformanceTool("test_image_content", "image content", "Returns one PNG image block."),
			reply(&sdk.ImageContent{Data: testPNG, MIMEType: "image/png"})),
		catalog.NewTool(conformanceTool("test_audio_content", "audio content", "Returns one WAV audio block."),
			reply(&sdk.AudioContent{Data: testWAV, MIMEType: "audio/wav"})),
		catalog.NewTool(conformanceTool("test_embedded_resource", "embedded resource", "Returns one embedded text resource."),
			reply(&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{
				URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource",
			}})),
		catalog.NewTool(conformanceTool("test_multiple_content_types", "multiple content types", "Returns a text, an image and an embedded resource block."),
			reply(
				&sdk.TextContent{Text: "This is text content"},
				&sdk.ImageContent{Data: testPNG, MIMEType: "image/png"},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{
					URI: "test://embedded-in-multiple", MIMEType: "text/plain", Text: "This is an embedded resource",
				}},
			)),
		catalog.NewTool(conformanceTool("test_tool_with_logging", "logging", "Sends three info log messages while it runs."), toolWithLogging),
		catalog.NewTool(conformanceTool("test_tool_with_progress", "progress", "Reports progress 0, 50 and 100 of 100, then returns the progress token."), toolWithProgress),
		catalog.NewTool(conformanceTool("test_error_handling", "error handling", "Always fails with a tool error (isError true)."),
			func(context.Context, *sdk.CallToolRequest, any) (*sdk.CallToolResult, any, error) {
				return nil, nil, fmt.Errorf("this tool intentionally returns an error for testing")
			}),
		catalog.NewTool(conformanceTool("test_panic", "panic", "Panics: the server must turn it into an error result and live on (fault tests)."),
			func(context.Context, *sdk.CallToolRequest, any) (*sdk.CallToolResult, any, error) {
				panic("test_panic: intentional panic for fault tests")
			}),
		catalog.NewTool(conformanceTool("test_sampling", "sampling", "Asks the client's model to complete the prompt (sampling/createMessage) and returns its answer."), toolSampling),
		catalog.NewTool(conformanceTool("test_elicitation", "elicitation", "Asks the user for a username (elicitation/create) and returns the answer."), toolElicitation),
		catalog.NewTool(conformanceTool("test_elicitation_sep1034_defaults", "elicitation defaults", "Asks the user for values that have defaults (SEP-1034)."),
			elicitWith("Test defaults for primitives", elicitDefaultsSchema())),
		catalog.NewTool(conformanceTool("test_elicitation_sep1330_enums", "elicitation enums", "Asks the user to choose among enums in every form SEP-1330 defines."),
			elicitWith("Test enum schemas", elicitEnumsSchema())),
		catalog.NewTool(func() *sdk.Tool {
			t := conformanceTool("json_schema_2020_12_tool", "JSON Schema 2020-12", "Takes input described with JSON Schema 2020-12 features ($defs, $anchor, allOf/anyOf, if/then/else) and echoes it (SEP-1613, SEP-2106).")
			t.InputSchema = json.RawMessage(schema202012)
			return t
		}(), func(_ context.Context, _ *sdk.CallToolRequest, in json.RawMessage) (*sdk.CallToolResult, any, error) {
			return textResult("JSON Schema 2020-12 tool called with: " + string(in)), nil, nil
		}),
		catalog.NewTool(conformanceTool("test_reconnection", "reconnection", "Closes the SSE stream mid-call; the result arrives after the client reconnects (SEP-1699)."), toolReconnection),
		catalog.NewTool(func() *sdk.Tool {
			t := conformanceTool("test_x_mcp_header", "x-mcp-header", "Has an argument mirrored into the Mcp-Param-Region header (SEP-2243) and returns it.")
			t.InputSchema = json.RawMessage(`{
				"type": "object",
				"properties": {
					"region": {"type": "string", "description": "Mirrored into the Mcp-Param-Region header.", "x-mcp-header": "Region"},
					"level": {"type": "integer", "description": "An argument that is not mirrored."}
				}
			}`)
			return t
		}(), func(_ context.Context, _ *sdk.CallToolRequest, in struct {
			Region string `json:"region,omitempty"`
			Level  int    `json:"level,omitempty"`
		}) (*sdk.CallToolResult, any, error) {
			return textResult("region=" + in.Region), nil, nil
		}),
		catalog.NewTool(conformanceTool("test_missing_capability", "missing capability", "Needs the client's sampling capability and fails with error -32021 without it (SEP-2575)."), toolMissingCapability),
		catalog.NewTool(conformanceTool("test_streaming_elicitation", "streaming", "Returns a plain result; its response stream carries no server requests (SEP-2575)."),
			reply(&sdk.TextContent{Text: "stream observed: result frames only, no top-level requests"})),
		catalog.NewTool(conformanceTool("test_logging_tool", "log gating", "Tries to log; the SDK drops the message unless the request opted in to a log level (SEP-2575)."),
			func(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
				_ = req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Data: "test_logging_tool executed"})
				return textResult("Log attempted; framework gates on _meta.../logLevel."), nil, nil
			}),
		{Name: "test_trigger_tool_change", Add: func(s *sdk.Server) {
			t := conformanceTool("test_trigger_tool_change", "tool list change", "Adds a tool, so that subscribed clients get notifications/tools/list_changed (SEP-2575).")
			t.Annotations.ReadOnlyHint = false
			sdk.AddTool(s, t, triggerToolChange(c, s))
		}},
		{Name: "test_trigger_prompt_change", Add: func(s *sdk.Server) {
			t := conformanceTool("test_trigger_prompt_change", "prompt list change", "Adds a prompt, so that subscribed clients get notifications/prompts/list_changed (SEP-2575).")
			t.Annotations.ReadOnlyHint = false
			sdk.AddTool(s, t, triggerPromptChange(s))
		}},
	}
	ts = append(ts, taskConformanceTools()...)
	return append(ts, inputRequiredTools()...)
}

func toolWithLogging(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	for _, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
		if err := req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Data: msg}); err != nil {
			return nil, nil, fmt.Errorf("sending log message: %w", err)
		}
	}
	return textResult("Tool with logging executed successfully"), nil, nil
}

func toolWithProgress(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	token := req.Params.GetProgressToken()
	if token == nil {
		return textResult("no progress token was given, so no progress was reported"), nil, nil
	}
	const total = 100.0
	for _, done := range []float64{0, 50, 100} {
		err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      done,
			Total:         total,
			Message:       fmt.Sprintf("Completed step %.0f of %.0f", done, total),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("sending progress: %w", err)
		}
	}
	return textResult(fmt.Sprint(token)), nil, nil
}

type samplingInput struct {
	Prompt string `json:"prompt" jsonschema:"The prompt to send to the client's model."`
}

func toolSampling(ctx context.Context, req *sdk.CallToolRequest, in samplingInput) (*sdk.CallToolResult, any, error) {
	res, err := req.Session.CreateMessage(ctx, &sdk.CreateMessageParams{
		Messages:  []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: in.Prompt}}},
		MaxTokens: 100,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sampling failed: %w", err)
	}
	answer := "(non-text response)"
	if tc, ok := res.Content.(*sdk.TextContent); ok {
		answer = tc.Text
	}
	return textResult("LLM response: " + answer), nil, nil
}

type elicitationInput struct {
	Message string `json:"message" jsonschema:"The message to show the user."`
}

func toolElicitation(ctx context.Context, req *sdk.CallToolRequest, in elicitationInput) (*sdk.CallToolResult, any, error) {
	return elicit(ctx, req, in.Message, &jsonschema.Schema{
		Type:       "object",
		Properties: map[string]*jsonschema.Schema{"username": {Type: "string", Description: "Your preferred username"}},
		Required:   []string{"username"},
	})
}

func elicitWith(message string, schema any) sdk.ToolHandlerFor[any, any] {
	return func(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
		return elicit(ctx, req, message, schema)
	}
}

func elicit(ctx context.Context, req *sdk.CallToolRequest, message string, schema any) (*sdk.CallToolResult, any, error) {
	res, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Message: message, RequestedSchema: schema})
	if err != nil {
		return nil, nil, fmt.Errorf("elicitation failed: %w", err)
	}
	return textResult(fmt.Sprintf("Elicitation result: action=%s, content=%v", res.Action, res.Content)), nil, nil
}

// elicitDefaultsSchema has a default for every primitive type (SEP-1034).
func elicitDefaultsSchema() any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name":     map[string]any{"type": "string", "description": "User name", "default": "John Doe"},
			"age":      map[string]any{"type": "integer", "description": "User age", "default": 30},
			"score":    map[string]any{"type": "number", "description": "User score", "default": 95.5},
			"status":   map[string]any{"type": "string", "description": "User status", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
			"verified": map[string]any{"type": "boolean", "description": "Verification status", "default": true},
		},
	}
}

// elicitEnumsSchema has every enum form of SEP-1330: plain, titled (oneOf),
// legacy enumNames, and the multi-select forms.
func elicitEnumsSchema() any {
	titled := []map[string]any{
		{"const": "value1", "title": "First Option"},
		{"const": "value2", "title": "Second Option"},
		{"const": "value3", "title": "Third Option"},
	}
	options := []string{"option1", "option2", "option3"}
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"untitledSingle": map[string]any{"type": "string", "enum": options},
			"titledSingle":   map[string]any{"type": "string", "oneOf": titled},
			"legacyEnum": map[string]any{
				"type": "string", "enum": []string{"opt1", "opt2", "opt3"},
				"enumNames": []string{"Option One", "Option Two", "Option Three"},
			},
			"untitledMulti": map[string]any{
				"type": "array", "minItems": 1, "maxItems": 3,
				"items": map[string]any{"type": "string", "enum": options},
			},
			"titledMulti": map[string]any{
				"type": "array", "minItems": 1, "maxItems": 3,
				// Titled items carry no type of their own (SEP-1330).
				"items": map[string]any{"anyOf": titled},
			},
		},
	}
}

// schema202012 uses the JSON Schema 2020-12 vocabulary that tools/list must
// pass through verbatim (SEP-1613, SEP-2106).
const schema202012 = `{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type": "object",
	"$defs": {
		"address": {
			"$anchor": "addressDef",
			"type": "object",
			"properties": {"street": {"type": "string"}, "city": {"type": "string"}}
		}
	},
	"properties": {
		"name": {"type": "string"},
		"address": {"$ref": "#/$defs/address"},
		"contactMethod": {"type": "string", "enum": ["phone", "email"]},
		"phone": {"type": "string"},
		"email": {"type": "string"}
	},
	"allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
	"if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
	"then": {"required": ["phone"]},
	"else": {"required": ["email"]},
	"additionalProperties": false
}`

func toolReconnection(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	if req.Extra != nil && req.Extra.CloseSSEStream != nil {
		req.Extra.CloseSSEStream(sdk.CloseSSEStreamArgs{RetryAfter: 10 * time.Millisecond})
	}
	// Give the client time to reconnect, so the result travels on the new stream.
	t := time.NewTimer(reconnectGracePeriod)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-t.C:
	}
	return textResult("Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure."), nil, nil
}

// toolMissingCapability fails with the protocol error SEP-2575 defines when
// the client did not declare sampling.
func toolMissingCapability(_ context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	if caps := req.ClientCapabilities(); caps != nil && caps.Sampling != nil {
		return textResult("Client declared the sampling capability; tool executed."), nil, nil
	}
	data, err := json.Marshal(sdk.MissingRequiredClientCapabilityData{
		RequiredCapabilities: &sdk.ClientCapabilities{Sampling: &sdk.SamplingCapabilities{}},
	})
	if err != nil {
		return nil, nil, err
	}
	return nil, nil, &jsonrpc.Error{
		Code:    sdk.CodeMissingRequiredClientCapabilities,
		Message: "sampling capability required but not declared by client",
		Data:    data,
	}
}

// triggerToolChange (re)adds a no-op tool: every AddTool notifies
// tools/list_changed, even when it replaces a tool of the same name.
func triggerToolChange(c *catalog.Catalog, s *sdk.Server) sdk.ToolHandlerFor[any, any] {
	return func(context.Context, *sdk.CallToolRequest, any) (*sdk.CallToolResult, any, error) {
		t := conformanceTool(transientToolName, "transient tool", "Does nothing; exists to change the tool list.")
		catalog.AddRunningTool(c, s, t, reply())
		return textResult("tools_list_changed published"), nil, nil
	}
}

func triggerPromptChange(s *sdk.Server) sdk.ToolHandlerFor[any, any] {
	return func(context.Context, *sdk.CallToolRequest, any) (*sdk.CallToolResult, any, error) {
		s.AddPrompt(&sdk.Prompt{Name: transientPromptName, Description: "Exists to change the prompt list."},
			func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
				return &sdk.GetPromptResult{}, nil
			})
		return textResult("prompts_list_changed published"), nil, nil
	}
}

// addConformanceContent adds the conformance resources, prompts and
// completions, and turns on subscriptions and the watched resource.
func addConformanceContent(c *catalog.Catalog) {
	c.AddResource(&sdk.Resource{URI: "test://static-text", Name: "static-text", Title: "Static text", Description: "A static text resource for testing", MIMEType: "text/plain"},
		staticResource("text/plain", []byte("This is the content of the static text resource.")))
	c.AddResource(&sdk.Resource{URI: "test://static-binary", Name: "static-binary", Title: "Static binary", Description: "A static binary resource (image) for testing", MIMEType: "image/png"},
		staticResource("image/png", testPNG))
	c.AddResource(&sdk.Resource{URI: watchedResourceURI, Name: "watched-resource", Title: "Watched resource", Description: "A resource reported as updated every 3 seconds; subscribe to it", MIMEType: "text/plain"},
		staticResource("text/plain", []byte("Watched resource content")))
	tmpl := uritemplate.MustNew(conformanceTemplate)
	c.AddTemplate(
		&sdk.ResourceTemplate{URITemplate: conformanceTemplate, Name: "template", Title: "Template", Description: "A resource template with parameter substitution", MIMEType: "application/json"},
		func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			m := tmpl.Match(req.Params.URI)
			if m == nil {
				return nil, sdk.ResourceNotFoundError(req.Params.URI)
			}
			id := m.Get("id").String()
			data, err := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			if err != nil {
				return nil, err
			}
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(data)}}}, nil
		},
	)
	c.AddCompletions("ref/resource", conformanceTemplate, "id", []string{"1", "2", "3"})

	userText := func(s string) *sdk.PromptMessage {
		return &sdk.PromptMessage{Role: "user", Content: &sdk.TextContent{Text: s}}
	}
	c.AddPrompt(&sdk.Prompt{Name: "test_simple_prompt", Title: "Simple Test Prompt", Description: "A simple prompt without arguments"},
		func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Description: "A simple test prompt", Messages: []*sdk.PromptMessage{userText("This is a simple prompt for testing.")}}, nil
		})
	c.AddPrompt(&sdk.Prompt{Name: "test_prompt_with_arguments", Title: "Prompt With Arguments", Description: "A prompt with required arguments",
		Arguments: []*sdk.PromptArgument{
			{Name: "arg1", Description: "First test argument", Required: true},
			{Name: "arg2", Description: "Second test argument", Required: true},
		}},
		func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			a := req.Params.Arguments
			return &sdk.GetPromptResult{Description: "A prompt with arguments",
				Messages: []*sdk.PromptMessage{userText(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"]))}}, nil
		})
	c.AddPrompt(&sdk.Prompt{Name: "test_prompt_with_embedded_resource", Title: "Prompt With Embedded Resource", Description: "A prompt that includes an embedded resource",
		Arguments: []*sdk.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Description: "A prompt with an embedded resource", Messages: []*sdk.PromptMessage{
				{Role: "user", Content: &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{
					URI: req.Params.Arguments["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing.",
				}}},
				userText("Please process the embedded resource above."),
			}}, nil
		})
	c.AddPrompt(&sdk.Prompt{Name: "test_prompt_with_image", Title: "Prompt With Image", Description: "A prompt that includes image content"},
		func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Description: "A prompt with an image", Messages: []*sdk.PromptMessage{
				{Role: "user", Content: &sdk.ImageContent{Data: testPNG, MIMEType: "image/png"}},
				userText("Please analyze the image above."),
			}}, nil
		})
	c.AddPrompt(&sdk.Prompt{Name: "test_input_required_result_prompt", Title: "Prompt needing input", Description: "MRTR (SEP-2322): asks for context via an in-band elicitation request"},
		func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			if ctx := accepted(req.Params.InputResponses, "user_context"); ctx != nil {
				s, _ := ctx["context"].(string)
				return &sdk.GetPromptResult{Description: "A prompt with elicited context", Messages: []*sdk.PromptMessage{userText("Context: " + s)}}, nil
			}
			return &sdk.GetPromptResult{InputRequests: sdk.InputRequestMap{
				"user_context": &sdk.ElicitParams{Message: "Please provide context for the prompt", RequestedSchema: objectOf("context", "string")},
			}}, nil
		})
	c.AddCompletions("ref/prompt", "test_prompt_with_arguments", "arg1", []string{"alpha", "beta", "gamma"})
	c.AddCompletions("ref/prompt", "test_prompt_with_arguments", "arg2", []string{"one", "two", "three"})

	c.Watch(watchedResourceURI, watchedInterval)
}
