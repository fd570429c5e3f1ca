package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/curation"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
)

// spy is the upstream "up" (prefix up): its tool search records the
// arguments that reach it, through the SDK server or directly.
type spy struct {
	mu     sync.Mutex
	args   []string // each call's arguments, normalized
	direct int
	quiet  bool // records nothing (benchmarks)
}

const spySearchSchema = `{"type":"object","properties":{"q":{"type":"string","description":"the query"},"org":{"type":"string","enum":["acme","beta"]}},"required":["q","org"]}`

func (s *spy) record(req *sdk.CallToolRequest, direct bool) string {
	var v any
	_ = json.Unmarshal(req.Params.Arguments, &v)
	b, _ := json.Marshal(v)
	if s.quiet {
		return string(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.args = append(s.args, string(b))
	if direct {
		s.direct++
	}
	return string(b)
}

// calls returns the arguments of the calls so far.
func (s *spy) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.args)
}

func (s *spy) set() catalog.Set {
	out := json.RawMessage(`{"type":"object","properties":{"hits":{"type":"integer"}}}`)
	return catalog.Set{
		Origin: "up", Prefix: "up",
		Tools: []catalog.SetTool{{
			Tool: &sdk.Tool{Name: "up_search", Description: "Searches.", InputSchema: json.RawMessage(spySearchSchema), OutputSchema: out},
			Handler: func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s.record(req, false)}}}, nil
			},
			Direct: func(_ context.Context, req *sdk.CallToolRequest) (sdk.Result, error) {
				b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": s.record(req, true)}}})
				return &catalog.RawToolResult{JSON: b}, nil
			},
		}, {
			// Renamed by the view; its argument is bound to a header.
			Tool: &sdk.Tool{Name: "up_locate", InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)},
			Handler: func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s.record(req, false)}}}, nil
			},
		}, {
			Tool: &sdk.Tool{Name: "up_delete", InputSchema: json.RawMessage(`{"type":"object"}`)},
			Handler: func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "deleted " + s.record(req, false)}}}, nil
			},
		}},
		Prompts: []catalog.SetPrompt{{
			Prompt: &sdk.Prompt{Name: "up_review", Description: "Reviews."},
			Handler: func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
				return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: "review it"}}}}, nil
			},
		}},
	}
}

// curatedCatalog is the core toolset, two declared resources and the
// upstream up of s.
func curatedCatalog(tb testing.TB, s *spy) *catalog.Catalog {
	tb.Helper()
	cat, err := toolsets.New(toolsets.Options{Toolsets: []string{"core"}}, toolsets.Deps{})
	if err != nil {
		tb.Fatal(err)
	}
	cat.SetOrigin(curation.SourceDeclared)
	for _, uri := range []string{"file:///handbook", "file:///secret"} {
		cat.AddResource(&sdk.Resource{URI: uri, Name: strings.TrimPrefix(uri, "file:///"), MIMEType: "text/plain"},
			func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
				return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: "text of " + req.Params.URI}}}, nil
			})
	}
	cat.ForwardToSources() // subscriptions on
	if _, err := cat.SetSource("upstream up", s.set()); err != nil {
		tb.Fatal(err)
	}
	return cat
}

// curatedExposure renames and curates three tools, keeps time as it is, and
// exposes one resource and one prompt.
func curatedExposure() *curation.Exposure {
	yes := true
	return &curation.Exposure{
		Tools: []curation.ToolSelection{
			{Source: "core", Name: "echo", ExposeAs: "say", Title: "Say", Description: "Says it back.",
				Annotations: curation.Annotations{IdempotentHint: &yes},
				Arguments:   map[string]curation.Argument{"text": {Description: "What to say", Default: json.RawMessage(`"hi"`)}}},
			{Source: "core", Name: "calculator", ExposeAs: "add", FixedArguments: map[string]json.RawMessage{"operation": json.RawMessage(`"add"`)}},
			{Source: "up", Name: "search", ExposeAs: "find", FixedArguments: map[string]json.RawMessage{"org": json.RawMessage(`"acme"`)},
				Arguments: map[string]curation.Argument{"q": {Description: "Query"}}},
			{Source: "core", Name: "time"},
			{Source: "up", Name: "locate", ExposeAs: "where"},
		},
		Resources: []curation.ResourceSelection{{Source: curation.SourceDeclared, URI: "file:///handbook", ExposeAs: "Handbook"}},
		Prompts:   []curation.PromptSelection{{Source: "up", Name: "review", ExposeAs: "review_pr", Description: "Review a PR of ours"}},
	}
}

var exposedTools = []string{"add", "find", "say", "time", "where"}

// connectEra connects an SDK client of protocol version era to a server
// of cat with view, over Streamable HTTP.
func connectEra(t *testing.T, cat *catalog.Catalog, view *curation.Exposure, deps Deps, era string) *sdk.ClientSession {
	t.Helper()
	deps.Version, deps.Exposure = "t", view
	ts := httptest.NewServer(New(cat, Options{}, deps).Handler())
	t.Cleanup(ts.Close)
	ct := &sdk.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).
		Connect(t.Context(), ct, &sdk.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

var eras = []string{"2025-11-25", modernHdr}

func TestCuratedLists(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			s := &spy{}
			cat := curatedCatalog(t, s)
			root := connectEra(t, cat, nil, Deps{}, era)
			cs := connectEra(t, cat, curatedExposure(), Deps{}, era)

			rootTools := map[string]*sdk.Tool{}
			for tl, err := range root.Tools(t.Context(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				rootTools[tl.Name] = tl
			}
			got := map[string]*sdk.Tool{}
			for tl, err := range cs.Tools(t.Context(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				got[tl.Name] = tl
				// What a caller sees is JSON Schema 2020-12 the SDK's
				// validator takes.
				var sch jsonschema.Schema
				b, _ := json.Marshal(tl.InputSchema)
				if err := json.Unmarshal(b, &sch); err != nil {
					t.Fatalf("%s: %v", tl.Name, err)
				}
				if _, err := sch.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
					t.Errorf("%s: the input schema is not valid: %v\n%s", tl.Name, err, b)
				}
			}
			if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, exposedTools) {
				t.Fatalf("tools = %q, want %q", names, exposedTools)
			}
			say, add, find := got["say"], got["add"], got["find"]
			if say.Title != "Say" || say.Description != "Says it back." || !say.Annotations.IdempotentHint || !say.Annotations.ReadOnlyHint {
				t.Errorf("say = %+v %+v, want the curated title, description and hint, echo's other hints", say, say.Annotations)
			}
			if !sameJSONValue(t, say.InputSchema, `{"type":"object","properties":{"text":{"type":"string","description":"What to say","maxLength":4096,"default":"hi"}},"required":["text"],"additionalProperties":false}`) {
				t.Errorf("say's input schema = %s", mustMarshal(say.InputSchema))
			}
			props := add.InputSchema.(map[string]any)["properties"].(map[string]any)
			if _, ok := props["operation"]; ok || slices.Contains(anyStrings(add.InputSchema.(map[string]any)["required"]), "operation") {
				t.Errorf("add's input schema = %s, want no operation", mustMarshal(add.InputSchema))
			}
			if !reflect.DeepEqual(add.OutputSchema, rootTools["calculator"].OutputSchema) || add.Description != rootTools["calculator"].Description {
				t.Errorf("add's output schema and description = %v %q, want calculator's", add.OutputSchema, add.Description)
			}
			if !sameJSONValue(t, find.InputSchema, `{"type":"object","properties":{"q":{"type":"string","description":"Query"}},"required":["q"]}`) ||
				!sameJSONValue(t, find.OutputSchema, `{"type":"object","properties":{"hits":{"type":"integer"}}}`) {
				t.Errorf("find = %s / %s", mustMarshal(find.InputSchema), mustMarshal(find.OutputSchema))
			}
			if !reflect.DeepEqual(got["time"], rootTools["time"]) {
				t.Errorf("time = %+v, want it as the root server lists it", got["time"])
			}

			var prompts []*sdk.Prompt
			for p, err := range cs.Prompts(t.Context(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				prompts = append(prompts, p)
			}
			if len(prompts) != 1 || prompts[0].Name != "review_pr" || prompts[0].Description != "Review a PR of ours" {
				t.Errorf("prompts = %+v", prompts)
			}
			var resources []*sdk.Resource
			for r, err := range cs.Resources(t.Context(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				resources = append(resources, r)
			}
			if len(resources) != 1 || resources[0].URI != "file:///handbook" || resources[0].Name != "Handbook" {
				t.Errorf("resources = %+v", resources)
			}
		})
	}
}

func TestCuratedCalls(t *testing.T) {
	unknown := func(name string) string { return unknownToolMessage(name, exposedTools) }
	tests := []struct {
		name    string
		tool    string
		args    any
		meta    sdk.Meta
		want    string // in the result's text
		wantErr string // in the error
		spy     string // the arguments the upstream got; "" for no call
	}{
		{name: "a default for an argument left out", tool: "say", args: map[string]any{}, want: "hi"},
		{name: "the caller's argument", tool: "say", args: map[string]any{"text": "yo"}, want: "yo"},
		{name: "a fixed argument reaches a typed tool", tool: "add", args: map[string]any{"a": 1, "b": 2}, want: `{"result":3}`},
		{name: "a fixed argument reaches the upstream", tool: "find", args: map[string]any{"q": "x"}, want: `"org":"acme"`, spy: `{"org":"acme","q":"x"}`},
		{name: "an uncurated tool", tool: "time", args: map[string]any{}, want: "T"},

		// A fixed argument the caller sets never reaches the tool.
		{name: "a fixed argument by its name", tool: "add", args: map[string]any{"a": 1, "b": 2, "operation": "subtract"}, wantErr: `"operation" is set by the server`},
		{name: "a fixed argument in another case", tool: "add", args: map[string]any{"a": 1, "b": 2, "Operation": "subtract"}, wantErr: `"Operation" is set by the server`},
		{name: "a fixed argument upper case, upstream", tool: "find", args: map[string]any{"q": "x", "ORG": "beta"}, wantErr: `"ORG" is set by the server`},
		{name: "a fixed argument escaped", tool: "find", args: json.RawMessage(`{"q":"x","\u004frg":"beta"}`), wantErr: `"Org" is set by the server`},
		{name: "a fixed argument in _meta has no effect", tool: "find", args: map[string]any{"q": "x"},
			meta: sdk.Meta{"org": "beta", "arguments": map[string]any{"org": "beta"}}, want: `"org":"acme"`, spy: `{"org":"acme","q":"x"}`},
		{name: "a fixed argument under _meta in the arguments has no effect", tool: "find", args: map[string]any{"q": "x", "_meta": map[string]any{"org": "beta"}},
			want: `"org":"acme"`, spy: `{"_meta":{"org":"beta"},"org":"acme","q":"x"}`},

		// What the view leaves out or renames answers as an unknown tool.
		{name: "a renamed tool by its original name", tool: "echo", args: map[string]any{"text": "x"}, wantErr: unknown("echo")},
		{name: "a renamed upstream tool by its original name", tool: "up_search", args: map[string]any{"q": "x", "org": "beta"}, wantErr: unknown("up_search")},
		{name: "an upstream tool by its name upstream", tool: "search", args: map[string]any{"q": "x"}, wantErr: unknown("search")},
		{name: "an upstream tool left out", tool: "up_delete", args: map[string]any{}, wantErr: unknown("up_delete")},
		{name: "a core tool left out", tool: "PingME", args: map[string]any{}, wantErr: unknown("PingME")},
		{name: "a name that exists nowhere", tool: "nope", args: map[string]any{}, wantErr: unknown("nope")},
	}
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			s := &spy{}
			cs := connectEra(t, curatedCatalog(t, s), curatedExposure(), Deps{}, era)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					before := len(s.calls())
					res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: tt.tool, Arguments: tt.args, Meta: tt.meta})
					if tt.wantErr != "" {
						var jerr *jsonrpc.Error
						if err == nil || !strings.Contains(err.Error(), tt.wantErr) || (errors.As(err, &jerr) && jerr.Code != jsonrpc.CodeInvalidParams) {
							t.Fatalf("CallTool(%s) = %v, %v; want a -32602 error with %q", tt.tool, res, err, tt.wantErr)
						}
					} else {
						if err != nil || res.IsError || !strings.Contains(callText(res), tt.want) {
							t.Fatalf("CallTool(%s) = %+v (%q), %v; want %q", tt.tool, res, callText(res), err, tt.want)
						}
					}
					got := s.calls()[before:]
					if tt.spy == "" && len(got) != 0 || tt.spy != "" && !slices.Equal(got, []string{tt.spy}) {
						t.Errorf("the upstream got %q, want %q", got, tt.spy)
					}
				})
			}
		})
	}
}

func callText(res *sdk.CallToolResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestCuratedPromptsAndResources(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cs := connectEra(t, curatedCatalog(t, &spy{}), curatedExposure(), Deps{}, era)
			if res, err := cs.GetPrompt(t.Context(), &sdk.GetPromptParams{Name: "review_pr"}); err != nil || len(res.Messages) != 1 {
				t.Errorf("review_pr = %v, %v", res, err)
			}
			for _, name := range []string{"up_review", "review", "nope"} {
				_, err := cs.GetPrompt(t.Context(), &sdk.GetPromptParams{Name: name})
				if err == nil || !strings.Contains(err.Error(), `unknown prompt "`+name+`"`) {
					t.Errorf("prompt %s: %v, want unknown prompt", name, err)
				}
			}
			if res, err := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: "file:///handbook"}); err != nil || res.Contents[0].Text != "text of file:///handbook" {
				t.Errorf("read the handbook: %v, %v", res, err)
			}
			_, secret := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: "file:///secret"})
			_, none := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: "file:///none"})
			if secret == nil || none == nil || strings.ReplaceAll(secret.Error(), "secret", "none") != none.Error() {
				t.Errorf("a resource left out: %v; one that does not exist: %v; want the same answer", secret, none)
			}
			if era != "2025-11-25" {
				return // subscriptions are the legacy sessions'
			}
			if err := cs.Subscribe(t.Context(), &sdk.SubscribeParams{URI: "file:///handbook"}); err != nil {
				t.Errorf("subscribe to the handbook: %v", err)
			}
			if err := cs.Subscribe(t.Context(), &sdk.SubscribeParams{URI: "file:///secret"}); err == nil {
				t.Error("subscribed to a resource the view leaves out")
			}
			res, err := cs.Complete(t.Context(), &sdk.CompleteParams{Ref: &sdk.CompleteReference{Type: "ref/prompt", Name: "greet"}, Argument: sdk.CompleteParamsArgument{Name: "x"}})
			if err != nil || len(res.Completion.Values) != 0 {
				t.Errorf("completion of a prompt the view does not have: %v, %v", res, err)
			}
		})
	}
}

// TestCuratedHeaders shows that a 2026-07-28 call names the tool by its
// exposed name in Mcp-Name as in the body, that a mismatch is refused as
// it is on /mcp, and that the policy names exposed names: with and
// without a policy (which the HTTP handler applies before the SDK), on
// the direct path (find) and the SDK's (say).
func TestCuratedHeaders(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]bool{}
	policy := func(_ *sdkauth.TokenInfo, tool string) (bool, []string, bool) {
		mu.Lock()
		defer mu.Unlock()
		asked[tool] = true
		return tool != "add", nil, true
	}
	tests := []struct {
		name         string
		header, body string
		args         string
		status       int    // 0: as for a tool that exists nowhere
		wantErr      string // in the error message; "" for a result
		direct       bool
	}{
		{name: "exposed in both", header: "find", body: "find", args: `{"q":"x"}`, status: http.StatusOK, direct: true},
		{name: "exposed in both, via the SDK", header: "say", body: "say", args: `{}`, status: http.StatusOK},
		{name: "the original in both", header: "up_search", body: "up_search", args: `{"q":"x","org":"beta"}`, wantErr: `Unknown tool: "up_search"`},
		{name: "exposed in the header, the original in the body", header: "find", body: "up_search", args: `{"q":"x","org":"beta"}`, status: http.StatusBadRequest, wantErr: "mismatch"},
		// A header naming another tool than the body is a mismatch,
		// with a policy or without: the conformance suite's
		// sep-2243-server-reject-invalid-headers.
		{name: "the original in the header, exposed in the body", header: "up_search", body: "find", args: `{"q":"x"}`, status: http.StatusBadRequest, wantErr: "mismatch"},
		{name: "another case in the header", header: "FIND", body: "find", args: `{"q":"x"}`, status: http.StatusBadRequest, wantErr: "mismatch"},
		{name: "a fixed argument", header: "find", body: "find", args: `{"q":"x","org":"beta"}`, status: http.StatusBadRequest, wantErr: "is set by the server"},
		// The server has up_locate, whose argument the SDK would check
		// against a header the call lacks: it answers as a tool that
		// exists nowhere all the same.
		{name: "the original of a tool that binds headers", header: "up_locate", body: "up_locate", args: `{"region":"eu"}`, wantErr: `Unknown tool: "up_locate"`},
	}
	for _, withPolicy := range []bool{false, true} {
		name := "no policy"
		var deps Deps
		if withPolicy {
			name, deps.Policy = "policy", policy
		}
		t.Run(name, func(t *testing.T) {
			s := &spy{}
			deps.Exposure = curatedExposure()
			h := New(curatedCatalog(t, s), Options{}, deps).Handler()
			nowhere := directPost(t, h, modernCall("nope", `{}`), map[string]string{"Mcp-Name": "nope"})
			if errorCode(nowhere.message) != jsonrpc.CodeInvalidParams {
				t.Fatalf("a tool that exists nowhere: %s", nowhere.body)
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					before, direct := len(s.calls()), s.direct
					r := directPost(t, h, modernCall(tt.body, tt.args), map[string]string{"Mcp-Name": tt.header})
					status := tt.status
					if status == 0 {
						status = nowhere.status
					}
					if r.status != status || (tt.wantErr == "") != (r.message["error"] == nil) || !strings.Contains(errorMessage(r.message), tt.wantErr) {
						t.Fatalf("status %d %s, want %d with %q", r.status, r.body, status, tt.wantErr)
					}
					calls := s.calls()[before:]
					if tt.body == "find" && tt.wantErr == "" {
						if !slices.Equal(calls, []string{`{"org":"acme","q":"x"}`}) || (s.direct > direct) != tt.direct {
							t.Errorf("the upstream got %q (direct %v), want the fixed argument (direct %v)", calls, s.direct > direct, tt.direct)
						}
					} else if len(calls) != 0 {
						t.Errorf("the upstream got %q, want no call", calls)
					}
				})
			}
			if withPolicy {
				r := directPost(t, h, modernCall("add", `{"a":1,"b":2}`), map[string]string{"Mcp-Name": "add"})
				if !strings.Contains(errorMessage(r.message), `Unknown tool: "add"`) {
					t.Errorf("a tool the policy hides: %s", r.body)
				}
				mu.Lock()
				defer mu.Unlock()
				for tool := range asked {
					if !slices.Contains(exposedTools, tool) {
						t.Errorf("the policy was asked about %q, which callers cannot call", tool)
					}
				}
				if !asked["find"] || !asked["add"] {
					t.Errorf("the policy was asked about %v, want find and add among them", asked)
				}
			}
		})
	}
}

// TestNoViewIsTheRoot shows that a server without a view serves every
// tool of the catalog by its own name, the renamed ones included.
func TestNoViewIsTheRoot(t *testing.T) {
	srv := New(curatedCatalog(t, &spy{}), Options{}, Deps{Version: "t"})
	if srv.View() != nil {
		t.Fatal("View() of a server without one is not nil")
	}
	cs := connect(t, srv.SDK())
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "up_search", Arguments: map[string]any{"q": "x", "org": "beta"}})
	if err != nil || !strings.Contains(callText(res), `"org":"beta"`) {
		t.Errorf("up_search on the root = %v, %v", res, err)
	}
}

func anyStrings(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// sameJSONValue reports whether v encodes to the JSON value want.
func sameJSONValue(t *testing.T, v any, want string) bool {
	t.Helper()
	var got, w any
	if err := json.Unmarshal([]byte(mustMarshal(v)), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(got, w)
}
