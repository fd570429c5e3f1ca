package toolsets

import (
	"context"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// Tasks extension fixtures (SEP-2663), with the names and behaviour the
// conformance suite's tasks scenarios call.
func taskConformanceTools() []catalog.Tool {
	optional := tasks.ToolTasks{Support: tasks.SupportOptional}
	required := tasks.ToolTasks{Support: tasks.SupportRequired}
	type greetIn struct {
		Name string `json:"name" jsonschema:"who to greet"`
	}
	type slowIn struct {
		Seconds float64 `json:"seconds" jsonschema:"how long to work, in seconds"`
		Label   string  `json:"label,omitempty" jsonschema:"a label echoed in the result"`
	}
	type fileIn struct {
		Filename string `json:"filename" jsonschema:"the file to delete"`
	}
	return []catalog.Tool{
		catalog.NewTool(conformanceTool("greet", "greet", "Greets by name; never runs as a task."),
			func(_ context.Context, _ *sdk.CallToolRequest, in greetIn) (*sdk.CallToolResult, any, error) {
				return textResult("Hello, " + in.Name + "!"), nil, nil
			}),
		catalog.NewTaskTool(conformanceTool("slow_compute", "slow compute", "Works for the given number of seconds, then returns; runs as a task for clients that support tasks."),
			func(ctx context.Context, _ *sdk.CallToolRequest, in slowIn) (*sdk.CallToolResult, any, error) {
				t := time.NewTimer(time.Duration(in.Seconds * float64(time.Second)))
				defer t.Stop()
				select {
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				case <-t.C:
				}
				return textResult(fmt.Sprintf("Computed %q after %gs.", in.Label, in.Seconds)), nil, nil
			}, optional),
		catalog.NewTaskTool(conformanceTool("failing_job", "failing job", "Fails with a tool error after about a second; only runs as a task."),
			func(ctx context.Context, _ *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
				select {
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				case <-time.After(time.Second): // the job's work
				}
				return nil, nil, fmt.Errorf("the job failed, as this fixture always does")
			}, required),
		catalog.NewTaskTool(conformanceTool("protocol_error_job", "protocol error job", "Panics, which fails its task with an internal (protocol) error."),
			func(context.Context, *sdk.CallToolRequest, any) (*sdk.CallToolResult, any, error) {
				panic("protocol_error_job: intentional panic")
			}, optional),
		catalog.NewTaskTool(conformanceTool("confirm_delete", "confirm delete", "Asks for a confirmation during its task, then reports the (pretend) deletion."),
			func(_ context.Context, req *sdk.CallToolRequest, in fileIn) (*sdk.CallToolResult, any, error) {
				if r, ok := req.Params.InputResponses["confirm"].(*sdk.ElicitResult); ok && r != nil {
					if r.Action == "accept" {
						return textResult("Deleted " + in.Filename + "."), nil, nil
					}
					return textResult("Kept " + in.Filename + "."), nil, nil
				}
				return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{
					"confirm": &sdk.ElicitParams{Message: "Delete " + in.Filename + "?", RequestedSchema: objectOf("confirm", "boolean")},
				}}, nil, nil
			}, optional),
		catalog.NewTaskTool(conformanceTool("multi_input", "multiple inputs", "Asks two questions at once during its task."),
			func(_ context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
				first, second := accepted(req.Params.InputResponses, "first"), accepted(req.Params.InputResponses, "second")
				if first != nil && second != nil {
					return textResult(fmt.Sprintf("Got %v and %v.", first["name"], second["name"])), nil, nil
				}
				return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{
					"first":  &sdk.ElicitParams{Message: "First name?", RequestedSchema: nameAndConfirm()},
					"second": &sdk.ElicitParams{Message: "Second name?", RequestedSchema: nameAndConfirm()},
				}}, nil, nil
			}, optional),
		catalog.NewTaskTool(conformanceTool("test_tool_with_task", "input, then task", "Asks for the caller's name with a multi-round-trip request, then runs as a task that greets them."),
			func(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
				name, _ := accepted(req.Params.InputResponses, "user_name")["name"].(string)
				if name == "" {
					return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"user_name": askName("What is your name?")}}, nil, nil
				}
				res, err := tasks.Run(ctx, func(context.Context) (*sdk.CallToolResult, error) {
					return textResult("Hello, " + name + ", from a task!"), nil
				})
				return res, nil, err
			}, tasks.ToolTasks{Support: tasks.SupportRequired, HandlerStarts: true}),
	}
}

// nameAndConfirm is the form multi_input asks to fill in, twice.
func nameAndConfirm() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type: "object",
		Properties: map[string]*jsonschema.Schema{
			"name":    {Type: "string"},
			"confirm": {Type: "boolean"},
		},
	}
}
