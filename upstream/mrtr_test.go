package upstream

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

//lint:file-ignore SA1019 multi-round trips are tested with sampling and roots, which the 2026-07-28 revision deprecates and upstreams still ask for

// roundsBackend returns an upstream server whose tool "rounds" asks for
// input twice, keeping its progress in its requestState: first a name
// (elicitation), then the client's roots; whose prompt "asked" asks for
// a topic before it answers; and whose resource mem://asked asks who
// reads it.
func roundsBackend() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "rounds"}, nil)
	s.AddTool(&sdk.Tool{Name: "rounds", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		switch st := req.Params.RequestState; {
		case st == "":
			return &sdk.CallToolResult{RequestState: "round=1", InputRequests: sdk.InputRequestMap{
				"name": &sdk.ElicitParams{Message: "Your name?", RequestedSchema: map[string]any{
					"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}},
				}},
			}}, nil
		case st == "round=1":
			r, ok := req.Params.InputResponses["name"].(*sdk.ElicitResult)
			if !ok {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "round 1 needs the name"}
			}
			return &sdk.CallToolResult{RequestState: "round=2;name=" + r.Content["name"].(string), InputRequests: sdk.InputRequestMap{
				"roots": &sdk.ListRootsParams{},
			}}, nil
		case strings.HasPrefix(st, "round=2;name="):
			r, ok := req.Params.InputResponses["roots"].(*sdk.ListRootsResult)
			if !ok || len(r.Roots) == 0 {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "round 2 needs the roots"}
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.TrimPrefix(st, "round=2;name=") + "@" + r.Roots[0].URI}}}, nil
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestState"}
	})
	s.AddPrompt(&sdk.Prompt{Name: "asked"}, func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		if r, ok := req.Params.InputResponses["topic"].(*sdk.ElicitResult); ok && req.Params.RequestState == "prompt" {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: "about " + r.Content["name"].(string)}}}}, nil
		}
		return &sdk.GetPromptResult{RequestState: "prompt", InputRequests: sdk.InputRequestMap{
			"topic": &sdk.ElicitParams{Message: "Topic?", RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}},
			}},
		}}, nil
	})
	s.AddResource(&sdk.Resource{URI: "mem://asked", Name: "asked"}, func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		if r, ok := req.Params.InputResponses["who"].(*sdk.ElicitResult); ok && req.Params.RequestState == "resource" {
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: "for " + r.Content["name"].(string)}}}, nil
		}
		return &sdk.ReadResourceResult{RequestState: "resource", InputRequests: sdk.InputRequestMap{
			"who": &sdk.ElicitParams{Message: "Who?", RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}},
			}},
		}}, nil
	})
	return s
}

// startRounds starts a Manager with the rounds backend as upstream "be",
// its session on protocol version upVersion.
func startRounds(t *testing.T, f *front, upVersion string) *Manager {
	t.Helper()
	return startBackend(t, f, roundsBackend(), upVersion)
}

// rooted is a caller that answers elicitation with the name Ada and offers
// one root, counting the requests it answers.
func rooted(asked *atomic.Int32, mrtr bool) *sdk.ClientOptions {
	c := &sdk.ClientOptions{
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			asked.Add(1)
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
	}
	if !mrtr {
		c.MultiRoundTrip = &sdk.MultiRoundTripOptions{Disabled: true}
	}
	return c
}

func rootedCaller(t *testing.T, f *front, asked *atomic.Int32, version string, mrtr bool) *sdk.ClientSession {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	if _, err := f.server.Connect(callCtx(t), st, nil); err != nil {
		t.Fatal(err)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "caller"}, rooted(asked, mrtr))
	c.AddRoots(&sdk.Root{URI: "file:///work", Name: "work"})
	cs, err := c.Connect(callCtx(t), ct, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestInputRequiredResultsReachStatelessCallers(t *testing.T) {
	for _, upEra := range hopEras {
		t.Run("upstream "+upEra, func(t *testing.T) { testInputRequiredResultsReachStatelessCallers(t, upEra) })
	}
}

func testInputRequiredResultsReachStatelessCallers(t *testing.T, upEra string) {
	f := newFront(t)
	startRounds(t, f, upEra)
	var asked atomic.Int32
	cs := rootedCaller(t, f, &asked, "2026-07-28", false)
	call := func(responses sdk.InputResponseMap, state string) (*sdk.CallToolResult, error) {
		return cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_rounds", Arguments: map[string]any{}, InputResponses: responses, RequestState: state})
	}

	res, err := call(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if !res.NeedsInput() || res.InputRequests["name"] == nil {
		t.Fatalf("first round: result %+v, want the upstream's input request \"name\"", res)
	}
	first := res.RequestState
	if !strings.HasPrefix(first, statePrefix) || !strings.Contains(first, `"u":"be"`) {
		t.Errorf("first round: requestState %q, want the upstream's wrapped with its name", first)
	}
	res, err = call(sdk.InputResponseMap{"name": &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}}, first)
	if err != nil {
		t.Fatal(err)
	}
	if !res.NeedsInput() || res.InputRequests["roots"] == nil {
		t.Fatalf("second round: result %+v, want the upstream's input request \"roots\"", res)
	}
	if res.RequestState == first {
		t.Error("second round: the requestState did not change with the upstream's")
	}
	res, err = call(sdk.InputResponseMap{"roots": &sdk.ListRootsResult{Roots: []*sdk.Root{{URI: "file:///work"}}}}, res.RequestState)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := text(res), "Ada@file:///work"; res.NeedsInput() || res.IsError || got != want {
		t.Errorf("last round: result %q (error %v, needs input %v), want %q", got, res.IsError, res.NeedsInput(), want)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the caller was sent %d requests, want none: its input requests come in results", n)
	}

	// A state that is not this upstream's does not reach it.
	_, err = call(nil, statePrefix+`{"u":"other","s":"cm91bmQ9MQ"}`)
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("another upstream's state: error %v, want -32602", err)
	}
}

func TestInputRequiredResultsWithTheSDKClient(t *testing.T) {
	for _, upEra := range hopEras {
		t.Run("upstream "+upEra, func(t *testing.T) { testInputRequiredResultsWithTheSDKClient(t, upEra) })
	}
}

func testInputRequiredResultsWithTheSDKClient(t *testing.T, upEra string) {
	// The SDK client on 2026-07-28 fulfils input requests and retries by
	// itself: through Portcullis as directly, roots included.
	f := newFront(t)
	m := startRounds(t, f, upEra)
	var asked atomic.Int32
	cs := rootedCaller(t, f, &asked, "2026-07-28", true)
	res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_rounds", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := text(res), "Ada@file:///work"; res.IsError || got != want {
		t.Errorf("result %q (error %v), want %q", got, res.IsError, want)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the caller was asked %d times, want 1", n)
	}
	prompt, err := cs.GetPrompt(callCtx(t), &sdk.GetPromptParams{Name: "be_asked"})
	if err != nil {
		t.Fatal(err)
	}
	if len(prompt.Messages) != 1 || prompt.Messages[0].Content.(*sdk.TextContent).Text != "about Ada" {
		t.Errorf("prompt %+v, want one message \"about Ada\"", prompt.Messages)
	}
	read, err := cs.ReadResource(callCtx(t), &sdk.ReadResourceParams{URI: "mem://asked"})
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Contents) != 1 || read.Contents[0].Text != "for Ada" {
		t.Errorf("resource %+v, want \"for Ada\"", read.Contents)
	}
	if n := asked.Load(); n != 3 {
		t.Errorf("the caller was asked %d times, want 3 (tool, prompt, resource)", n)
	}
	if upEra == overHTTP {
		// Every round went by the direct hop: three of the tool's, two
		// of the prompt's, two of the resource's.
		u := m.ups[0]
		if n := u.conn.links.get(u.sup.session()).hop.sent.Load(); n != 7 {
			t.Errorf("the direct hop sent %d requests, want 7", n)
		}
	}
}

func TestInputRequestsFulfilledForOlderCallers(t *testing.T) {
	for _, upEra := range hopEras {
		t.Run("upstream "+upEra, func(t *testing.T) { testInputRequestsFulfilledForOlderCallers(t, upEra) })
	}
}

func testInputRequestsFulfilledForOlderCallers(t *testing.T, upEra string) {
	// A caller of 2025-11-25 is sent the upstream's input requests as
	// requests on its session, round after round, within one call.
	f := newFront(t)
	startRounds(t, f, upEra)
	var asked atomic.Int32
	cs := rootedCaller(t, f, &asked, "2025-11-25", true)
	res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_rounds", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := text(res), "Ada@file:///work"; res.IsError || got != want {
		t.Errorf("result %q (error %v), want %q", got, res.IsError, want)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the caller was asked %d times, want 1", n)
	}
	read, err := cs.ReadResource(callCtx(t), &sdk.ReadResourceParams{URI: "mem://asked"})
	if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != "for Ada" {
		t.Errorf("resource %+v (%v), want \"for Ada\"", read, err)
	}

	// A caller that offers no roots has the roots request refused.
	opts := answering(new(atomic.Int32))
	opts.Capabilities = &sdk.ClientCapabilities{} // the SDK's default offers roots
	noRoots := f.caller(t, opts, "2025-11-25")
	res, err = noRoots.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_rounds", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(res), "does not offer roots") {
		t.Errorf("result %q (error %v), want an error saying the caller offers no roots", text(res), res.IsError)
	}
}
