package toolsets

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// conformanceToolNames are the tools the conformance suite's server
// scenarios call.
var conformanceToolNames = []string{
	"confirm_delete",
	"failing_job",
	"greet",
	"json_schema_2020_12_tool",
	"multi_input",
	"protocol_error_job",
	"slow_compute",
	"test_audio_content",
	"test_elicitation",
	"test_elicitation_sep1034_defaults",
	"test_elicitation_sep1330_enums",
	"test_embedded_resource",
	"test_error_handling",
	"test_image_content",
	"test_input_required_result_capabilities",
	"test_input_required_result_elicitation",
	"test_input_required_result_list_roots",
	"test_input_required_result_multi_round",
	"test_input_required_result_multiple_inputs",
	"test_input_required_result_request_state",
	"test_input_required_result_sampling",
	"test_input_required_result_tampered_state",
	"test_logging_tool",
	"test_missing_capability",
	"test_multiple_content_types",
	"test_panic",
	"test_reconnection",
	"test_sampling",
	"test_simple_text",
	"test_streaming_elicitation",
	"test_tool_with_logging",
	"test_tool_with_progress",
	"test_tool_with_task",
	"test_trigger_prompt_change",
	"test_trigger_tool_change",
	"test_x_mcp_header",
}

func TestConformanceRegistersWhatTheSuiteNeeds(t *testing.T) {
	c := newCatalog(t, Options{Toolsets: []string{"conformance"}}, Deps{})
	if got := c.ToolNames(); !slices.Equal(got, conformanceToolNames) {
		t.Errorf("ToolNames() = %v,\nwant %v", got, conformanceToolNames)
	}
	cs, _ := connect(t, c, nil)
	ctx := t.Context()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != len(conformanceToolNames) {
		t.Errorf("tools/list has %d tools, want %d", len(tools.Tools), len(conformanceToolNames))
	}
	for _, tl := range tools.Tools {
		if tl.Name != "json_schema_2020_12_tool" {
			continue
		}
		b, _ := json.Marshal(tl.InputSchema)
		for _, kw := range []string{`"$defs"`, `"$anchor"`, `"allOf"`, `"if"`, `"then"`, `"else"`, `"additionalProperties":false`} {
			if !strings.Contains(string(b), kw) {
				t.Errorf("json_schema_2020_12_tool schema lost %s: %s", kw, b)
			}
		}
	}

	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var promptNames []string
	for _, p := range prompts.Prompts {
		promptNames = append(promptNames, p.Name)
	}
	slices.Sort(promptNames)
	wantPrompts := []string{"test_input_required_result_prompt", "test_prompt_with_arguments", "test_prompt_with_embedded_resource", "test_prompt_with_image", "test_simple_prompt"}
	if !slices.Equal(promptNames, wantPrompts) {
		t.Errorf("prompts = %v, want %v", promptNames, wantPrompts)
	}

	resources, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range resources.Resources {
		uris = append(uris, r.URI)
	}
	slices.Sort(uris)
	if want := []string{"test://static-binary", "test://static-text", "test://watched-resource"}; !slices.Equal(uris, want) {
		t.Errorf("resources = %v, want %v", uris, want)
	}
	templates, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "test://template/{id}/data" {
		t.Errorf("resource templates = %+v, want test://template/{id}/data", templates.ResourceTemplates)
	}
}

// TestConformanceTools calls the tools on a legacy protocol version, where
// the server may send requests to the client, and on 2026-07-28, where
// only the multi round-trip tools may ask the client for input.
func TestConformanceTools(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) { testConformanceTools(t, version) })
	}
}

//lint:file-ignore SA1019 the conformance tools are called as the scenarios call them: with MCP logging, sampling and roots, which the 2026-07-28 revision deprecates

func testConformanceTools(t *testing.T, version string) {
	legacy := version < "2026-07-28"
	var (
		mu       sync.Mutex
		logs     []string
		progress []float64
	)
	copts := &sdk.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
			return &sdk.CreateMessageResult{Role: "assistant", Model: "fake", Content: &sdk.TextContent{Text: "Paris"}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"username": "ana", "name": "Ana", "ok": true, "color": "teal"}}, nil
		},
		LoggingMessageHandler: func(_ context.Context, req *sdk.LoggingMessageRequest) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, req.Params.Data.(string))
		},
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, req.Params.Progress)
		},
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "v0"}, copts)
	client.AddRoots(&sdk.Root{URI: "file:///work", Name: "work"})
	cs, _ := connectClient(t, newCatalog(t, Options{Toolsets: []string{"conformance"}}, Deps{}), client, version)
	if cs.InitializeResult().ProtocolVersion != version {
		t.Fatalf("negotiated %s, want %s", cs.InitializeResult().ProtocolVersion, version)
	}
	if legacy {
		if err := cs.SetLoggingLevel(t.Context(), &sdk.SetLoggingLevelParams{Level: "debug"}); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name      string
		tool      string
		args      any
		wantText  string // substring of the text content
		wantError bool
		wantTypes []string // content block types, in order; nil skips the check
		legacy    bool     // needs server-to-client requests, gone in 2026-07-28
	}{
		{name: "simple text", tool: "test_simple_text", wantText: "This is a simple text response for testing.", wantTypes: []string{"text"}},
		{name: "image", tool: "test_image_content", wantTypes: []string{"image"}},
		{name: "audio", tool: "test_audio_content", wantTypes: []string{"audio"}},
		{name: "embedded resource", tool: "test_embedded_resource", wantTypes: []string{"resource"}},
		{name: "multiple", tool: "test_multiple_content_types", wantTypes: []string{"text", "image", "resource"}},
		{name: "error", tool: "test_error_handling", wantText: "intentionally returns an error", wantError: true},
		{name: "sampling", tool: "test_sampling", args: map[string]any{"prompt": "Capital of France?"}, wantText: "LLM response: Paris", legacy: true},
		{name: "elicitation", tool: "test_elicitation", args: map[string]any{"message": "Who are you?"}, wantText: "action=accept", legacy: true},
		{name: "elicitation defaults", tool: "test_elicitation_sep1034_defaults", wantText: "action=accept", legacy: true},
		{name: "elicitation enums", tool: "test_elicitation_sep1330_enums", wantText: "action=accept", legacy: true},
		{name: "2020-12 schema", tool: "json_schema_2020_12_tool", args: map[string]any{"name": "a", "email": "a@b.c"}, wantText: `"email":"a@b.c"`},
		{name: "2020-12 schema rejects", tool: "json_schema_2020_12_tool", args: map[string]any{"name": "a"}, wantError: true},
		{name: "x-mcp-header", tool: "test_x_mcp_header", args: map[string]any{"region": "eu"}, wantText: "region=eu"},
		{name: "missing capability satisfied", tool: "test_missing_capability", wantText: "Client declared the sampling capability"},
		{name: "logging", tool: "test_tool_with_logging", wantText: "executed successfully", legacy: true},
		{name: "input required: elicitation", tool: "test_input_required_result_elicitation", wantText: "Hello, Ana!"},
		{name: "input required: sampling", tool: "test_input_required_result_sampling", wantText: "Sampling response: Paris"},
		{name: "input required: request state", tool: "test_input_required_result_request_state", wantText: "state-ok"},
		{name: "input required: tampered state", tool: "test_input_required_result_tampered_state", wantText: "state-ok"},
		{name: "input required: roots", tool: "test_input_required_result_list_roots", wantText: "Client exposed 1 root(s): file:///work"},
		{name: "input required: several inputs", tool: "test_input_required_result_multiple_inputs", wantText: "Paris Ana — 1 root(s) visible"},
		{name: "input required: two rounds", tool: "test_input_required_result_multi_round", wantText: "Multi-round complete: Ana likes teal"},
		{name: "input required: capabilities", tool: "test_input_required_result_capabilities", wantText: "Capability-aware input requests fulfilled"},
		{name: "trigger tool change", tool: "test_trigger_tool_change", wantText: "tools_list_changed published"},
	}
	for _, tt := range tests {
		if tt.legacy && !legacy {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, cs, tt.tool, tt.args)
			if res.IsError != tt.wantError {
				t.Fatalf("isError = %v, want %v (%s)", res.IsError, tt.wantError, resultText(res))
			}
			if !strings.Contains(resultText(res), tt.wantText) {
				t.Errorf("text = %q, want it to contain %q", resultText(res), tt.wantText)
			}
			if tt.wantTypes != nil {
				var types []string
				for _, c := range res.Content {
					b, _ := json.Marshal(c)
					var v struct{ Type string }
					_ = json.Unmarshal(b, &v)
					types = append(types, v.Type)
				}
				if !slices.Equal(types, tt.wantTypes) {
					t.Errorf("content types = %v, want %v", types, tt.wantTypes)
				}
			}
		})
	}

	mu.Lock()
	defer mu.Unlock()
	if !legacy {
		return
	}
	if want := []string{"Tool execution started", "Tool processing data", "Tool execution completed"}; !slices.Equal(logs, want) {
		t.Errorf("log messages = %v, want %v", logs, want)
	}
}

func TestConformanceProgress(t *testing.T) {
	got := make(chan float64, 3)
	cs, _ := connect(t, newCatalog(t, Options{Toolsets: []string{"conformance"}}, Deps{}), &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			got <- req.Params.Progress
		},
	})
	params := &sdk.CallToolParams{Name: "test_tool_with_progress", Arguments: map[string]any{}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if resultText(res) != "tok-1" {
		t.Errorf("result = %q, want the progress token", resultText(res))
	}
	for _, want := range []float64{0, 50, 100} {
		select {
		case p := <-got:
			if p != want {
				t.Errorf("progress = %v, want %v", p, want)
			}
		case <-t.Context().Done():
			t.Fatal("progress notifications missing")
		}
	}
}

func TestConformanceResourcesPromptsCompletions(t *testing.T) {
	cs, _ := connect(t, newCatalog(t, Options{Toolsets: []string{"conformance"}}, Deps{}), nil)
	ctx := t.Context()

	res, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "test://template/42/data"})
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &data); err != nil || data["id"] != "42" || data["templateTest"] != true {
		t.Errorf("template resource = %s (%v), want id 42", res.Contents[0].Text, err)
	}
	res, err = cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "test://static-binary"})
	if err != nil || len(res.Contents[0].Blob) == 0 || res.Contents[0].MIMEType != "image/png" {
		t.Errorf("static-binary = %+v, %v; want a PNG blob", res, err)
	}

	p, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "test_prompt_with_arguments", Arguments: map[string]string{"arg1": "a", "arg2": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Messages[0].Content.(*sdk.TextContent).Text; got != "Prompt with arguments: arg1='a', arg2='b'" {
		t.Errorf("prompt text = %q", got)
	}

	comp, err := cs.Complete(ctx, &sdk.CompleteParams{
		Ref:      &sdk.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
		Argument: sdk.CompleteParamsArgument{Name: "arg1", Value: "al"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(comp.Completion.Values, []string{"alpha"}) {
		t.Errorf("completion = %v, want [alpha]", comp.Completion.Values)
	}
}

func TestConformanceWatchedResource(t *testing.T) {
	updated := make(chan string, 10)
	listChanged := make(chan struct{}, 10)
	c := newCatalog(t, Options{Toolsets: []string{"conformance"}}, Deps{})
	c.Watch(watchedResourceURI, 5*time.Millisecond)
	cs, s := connect(t, c, &sdk.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			listChanged <- struct{}{}
		},
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { c.Run(ctx, s); close(done) }()
	defer func() { cancel(); <-done }()

	if err := cs.Subscribe(t.Context(), &sdk.SubscribeParams{URI: watchedResourceURI}); err != nil {
		t.Fatal(err)
	}
	select {
	case uri := <-updated:
		if uri != watchedResourceURI {
			t.Errorf("updated %q, want %q", uri, watchedResourceURI)
		}
	case <-t.Context().Done():
		t.Fatal("no resource update notification")
	}

	call(t, cs, "test_trigger_tool_change", nil)
	select {
	case <-listChanged:
	case <-t.Context().Done():
		t.Fatal("no tools/list_changed notification")
	}
}

func TestRunWithoutBackgroundWorkReturns(t *testing.T) {
	c := newCatalog(t, Options{}, Deps{})
	c.Run(t.Context(), sdk.NewServer(&sdk.Implementation{Name: "x", Version: "v0"}, nil)) // must not block
}
