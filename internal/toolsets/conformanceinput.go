//lint:file-ignore SA1019 the multi round-trip scenarios ask for sampling and roots, which the 2026-07-28 revision deprecates

package toolsets

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/internal/catalog"
)

// Multi round-trip tools (SEP-2322). A handler answers with InputRequests
// until the retry carries the responses it needs. Our server seals
// requestState before it leaves and opens it before the handler runs, so a
// handler sees only states it produced; a tampered one never arrives here.

func inputRequiredTools() []catalog.Tool {
	return []catalog.Tool{
		catalog.NewTool(conformanceTool("test_input_required_result_elicitation", "input required: elicitation", "Asks for the caller's name with an in-band elicitation request, then greets them."), inputElicitation),
		catalog.NewTool(conformanceTool("test_input_required_result_sampling", "input required: sampling", "Asks the client's model a question with an in-band sampling request, then returns the answer."), inputSampling),
		catalog.NewTool(conformanceTool("test_input_required_result_list_roots", "input required: roots", "Asks for the client's roots with an in-band roots/list request, then lists them."), inputListRoots),
		catalog.NewTool(conformanceTool("test_input_required_result_request_state", "input required: request state", "Asks for a confirmation and round-trips requestState with it."), inputConfirm("request_state")),
		catalog.NewTool(conformanceTool("test_input_required_result_multiple_inputs", "input required: several inputs", "Asks for elicitation, sampling and roots input in one round."), inputMultiple),
		catalog.NewTool(conformanceTool("test_input_required_result_multi_round", "input required: two rounds", "Asks two questions in two rounds, carrying the first answer in requestState."), inputMultiRound),
		catalog.NewTool(conformanceTool("test_input_required_result_tampered_state", "input required: tampered state", "Asks for a confirmation; a retry whose requestState fails integrity checks is rejected."), inputConfirm("tampered_state")),
		catalog.NewTool(conformanceTool("test_input_required_result_capabilities", "input required: capabilities", "Asks only for the input kinds the client declared capabilities for."), inputCapabilities),
	}
}

func inputElicitation(_ context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	if name, _ := accepted(req.Params.InputResponses, "user_name")["name"].(string); name != "" {
		return textResult("Hello, " + name + "!"), nil, nil
	}
	return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"user_name": askName("What is your name?")}}, nil, nil
}

func inputSampling(_ context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	if answer, ok := sampled(req.Params.InputResponses, "capital_question"); ok {
		return textResult("Sampling response: " + answer), nil, nil
	}
	return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"capital_question": ask("What is the capital of France?", 100)}}, nil, nil
}

func inputListRoots(_ context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	if r, ok := req.Params.InputResponses["client_roots"].(*sdk.ListRootsResult); ok && r != nil {
		uris := make([]string, 0, len(r.Roots))
		for _, root := range r.Roots {
			uris = append(uris, root.URI)
		}
		return textResult(fmt.Sprintf("Client exposed %d root(s): %s", len(r.Roots), strings.Join(uris, ", "))), nil, nil
	}
	return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{"client_roots": &sdk.ListRootsParams{}}}, nil, nil
}

// inputConfirm asks for a confirmation and sends state along. A retry with
// the confirmation but no state is refused: the state is what proves the
// retry continues this call.
func inputConfirm(state string) sdk.ToolHandlerFor[any, any] {
	return func(_ context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
		if accepted(req.Params.InputResponses, "confirm") != nil {
			if req.Params.RequestState == "" {
				return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestState"}
			}
			return textResult("state-ok: requestState received and confirmation accepted"), nil, nil
		}
		return &sdk.CallToolResult{
			InputRequests: sdk.InputRequestMap{"confirm": &sdk.ElicitParams{Message: "Please confirm", RequestedSchema: objectOf("ok", "boolean")}},
			RequestState:  state,
		}, nil, nil
	}
}

func inputMultiple(_ context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	in := req.Params.InputResponses
	name, _ := accepted(in, "user_name")["name"].(string)
	greeting, greeted := sampled(in, "greeting")
	roots, rooted := in["client_roots"].(*sdk.ListRootsResult)
	if name != "" && greeted && rooted {
		n := 0
		if roots != nil {
			n = len(roots.Roots)
		}
		return textResult(fmt.Sprintf("%s %s — %d root(s) visible", greeting, name, n)), nil, nil
	}
	return &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{
			"user_name":    askName("What is your name?"),
			"greeting":     ask("Generate a greeting", 50),
			"client_roots": &sdk.ListRootsParams{},
		},
		RequestState: "multiple_inputs",
	}, nil, nil
}

// inputMultiRound keeps its progress in requestState ("round=1", then
// "round=2;name=…"): a stateless server has nowhere else to keep it.
func inputMultiRound(_ context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	state := req.Params.RequestState
	switch {
	case state == "":
		return &sdk.CallToolResult{
			InputRequests: sdk.InputRequestMap{"step1": askName("Step 1: What is your name?")},
			RequestState:  "round=1",
		}, nil, nil
	case state == "round=1":
		name, _ := accepted(req.Params.InputResponses, "step1")["name"].(string)
		if name == "" {
			name = "unknown"
		}
		return &sdk.CallToolResult{
			InputRequests: sdk.InputRequestMap{"step2": &sdk.ElicitParams{Message: "Step 2: What is your favorite color?", RequestedSchema: objectOf("color", "string")}},
			RequestState:  "round=2;name=" + name,
		}, nil, nil
	case strings.HasPrefix(state, "round=2;name="):
		color, _ := accepted(req.Params.InputResponses, "step2")["color"].(string)
		if color == "" {
			color = "unknown"
		}
		return textResult(fmt.Sprintf("Multi-round complete: %s likes %s", strings.TrimPrefix(state, "round=2;name="), color)), nil, nil
	}
	return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestState"}
}

func inputCapabilities(_ context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
	if len(req.Params.InputResponses) > 0 {
		return textResult("Capability-aware input requests fulfilled"), nil, nil
	}
	caps := req.ClientCapabilities()
	if caps == nil {
		caps = &sdk.ClientCapabilities{}
	}
	reqs := sdk.InputRequestMap{}
	if caps.Elicitation != nil {
		reqs["user_name"] = askName("What is your name?")
	}
	if caps.Sampling != nil {
		reqs["greeting"] = ask("Generate a short greeting", 50)
	}
	if caps.RootsV2 != nil || caps.Roots.ListChanged {
		reqs["client_roots"] = &sdk.ListRootsParams{}
	}
	if len(reqs) == 0 {
		return textResult("No declared client capability supports an in-band input request"), nil, nil
	}
	return &sdk.CallToolResult{InputRequests: reqs}, nil, nil
}
