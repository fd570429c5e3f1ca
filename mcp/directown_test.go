package mcp

import (
	"context"
	"encoding/json"
	"errors"
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

// sessionsSeen records the session each call of the own tools came on.
type sessionsSeen struct {
	mu   sync.Mutex
	seen []*sdk.ServerSession
}

func (s *sessionsSeen) add(req *sdk.CallToolRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, req.Session)
}

func (s *sessionsSeen) last(n int) []*sdk.ServerSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*sdk.ServerSession(nil), s.seen[len(s.seen)-n:]...)
}

// ownToolsCatalog is a catalog of typed tools that exercise what the
// SDK's tool handling does around a handler: validation of arguments
// (length, required, type), defaults, structured output, a tool error, a
// JSON-RPC error, a panic. noSession marks them all.
func ownToolsCatalog(seen *sessionsSeen, noSession bool) *catalog.Catalog {
	type echoIn struct {
		Text string `json:"text"`
	}
	type greetIn struct {
		Name  string `json:"name"`
		Greet string `json:"greet,omitempty"`
	}
	type sumOut struct {
		Sum   int    `json:"sum"`
		Label string `json:"label"`
	}
	maxLen := 5
	tools := []catalog.Tool{
		catalog.NewTool(&sdk.Tool{Name: "echo", InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"text"},
			Properties: map[string]*jsonschema.Schema{"text": {Type: "string", MaxLength: &maxLen}}}},
			func(_ context.Context, req *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
				seen.add(req)
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil, nil
			}),
		catalog.NewTool(&sdk.Tool{Name: "greet", InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"name"},
			Properties: map[string]*jsonschema.Schema{"name": {Type: "string"}, "greet": {Type: "string", Default: json.RawMessage(`"hello"`)}}}},
			func(_ context.Context, req *sdk.CallToolRequest, in greetIn) (*sdk.CallToolResult, any, error) {
				seen.add(req)
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Greet + ", " + in.Name}}}, nil, nil
			}),
		catalog.NewTool(&sdk.Tool{Name: "sum"},
			func(_ context.Context, req *sdk.CallToolRequest, in struct{ A, B int }) (*sdk.CallToolResult, sumOut, error) {
				seen.add(req)
				if in.A < 0 {
					return nil, sumOut{}, errors.New("a must not be negative")
				}
				if in.B < 0 {
					return nil, sumOut{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "b must not be negative"}
				}
				if in.A == 13 {
					panic("unlucky")
				}
				return nil, sumOut{Sum: in.A + in.B, Label: "sum"}, nil
			}),
	}
	for i := range tools {
		tools[i].NoSession = noSession
	}
	cat := catalog.New(nil)
	cat.Add(tools...)
	return cat
}

// A 2026-07-28 call of one of the catalog's own tools that uses no
// session is served directly, on one session for all, and answered as
// the SDK's handler answers it: the same status, content type and
// message, for results, tool errors, invalid arguments, defaults,
// structured output, JSON-RPC errors and panics.
func TestOwnToolsServedDirectly(t *testing.T) {
	seenDirect, seenSDK := &sessionsSeen{}, &sessionsSeen{}
	direct := New(ownToolsCatalog(seenDirect, true), Options{}, Deps{Version: "t"}).Handler()
	viaSDK := New(ownToolsCatalog(seenSDK, false), Options{}, Deps{Version: "t"}).Handler()
	for _, tt := range []struct {
		name, tool, args string
		ran              bool // the handler ran (arguments valid)
	}{
		{name: "a result", tool: "echo", args: `{"text":"hi"}`, ran: true},
		{name: "arguments over the schema's bounds", tool: "echo", args: `{"text":"too long"}`},
		{name: "a required argument missing", tool: "echo", args: `{}`},
		{name: "an argument of the wrong type", tool: "echo", args: `{"text":7}`},
		{name: "no arguments", tool: "echo", args: `null`},
		{name: "a default applied", tool: "greet", args: `{"name":"Ada"}`, ran: true},
		{name: "structured output", tool: "sum", args: `{"A":1,"B":2}`, ran: true},
		{name: "a tool error", tool: "sum", args: `{"A":-1,"B":2}`, ran: true},
		{name: "a JSON-RPC error", tool: "sum", args: `{"A":1,"B":-2}`, ran: true},
		{name: "a panic", tool: "sum", args: `{"A":13,"B":0}`, ran: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			header := map[string]string{"Mcp-Name": tt.tool}
			want := directPost(t, viaSDK, modernCall(tt.tool, tt.args), header)
			for range 2 {
				got := directPost(t, direct, modernCall(tt.tool, tt.args), header)
				// A direct call's result always says it is complete; the
				// SDK leaves resultType out of a result made by middleware
				// (a panic's) rather than by the tool. Any other answer is
				// the same to the byte.
				if res, ok := got.message["result"].(map[string]any); ok && res["resultType"] == "complete" {
					if w, _ := want.message["result"].(map[string]any); w != nil && w["resultType"] == nil {
						delete(res, "resultType")
					} else if got.body != want.body {
						t.Errorf("served directly:\n%s\nby the SDK's handler:\n%s", got.body, want.body)
					}
				}
				if got.status != want.status || got.header.Get("Content-Type") != want.header.Get("Content-Type") || !reflect.DeepEqual(got.message, want.message) {
					t.Fatalf("served directly: %d %s %v\nby the SDK's handler: %d %s %v", got.status, got.header.Get("Content-Type"), got.message,
						want.status, want.header.Get("Content-Type"), want.message)
				}
			}
			if !tt.ran {
				return
			}
			d, s := seenDirect.last(2), seenSDK.last(1)
			if d[0] == nil || d[0] != d[1] {
				t.Errorf("direct calls came on sessions %p and %p, want one session for both", d[0], d[1])
			}
			if s[0] == d[0] {
				t.Error("the SDK's handler served its call on the direct calls' session")
			}
		})
	}
}

// A direct call's session carries nothing: what a tool would send
// through it fails at once rather than waiting for a client.
func TestDirectCallsSessionSendsNothing(t *testing.T) {
	var sendErr error
	tool := catalog.NewTool(&sdk.Tool{Name: "chatty"}, func(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
		sendErr = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: "p", Progress: 1})
		return &sdk.CallToolResult{}, nil, nil
	})
	tool.NoSession = true // wrongly: it sends progress through its session
	cat := catalog.New(nil)
	cat.Add(tool)
	h := New(cat, Options{}, Deps{Version: "t"}).Handler()
	r := directPost(t, h, modernCall("chatty", `{}`), map[string]string{"Mcp-Name": "chatty"})
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if sendErr == nil {
		t.Error("a notification on a direct call's session succeeded, want an error")
	}
}

// encodeResponse and decodeID write and read what the jsonrpc package
// does, byte for byte, for every kind of id.
func TestEncodeResponseAsTheSDK(t *testing.T) {
	for _, raw := range []string{`7`, `-1`, `0`, `1e3`, `7.5`, `9007199254740993`, `"abc"`, `"a-b_c.d:e"`, `"<&>"`, `"é"`, `"a\"b"`, `""`} {
		var v any
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			t.Fatal(err)
		}
		want, err := jsonrpc.MakeID(v)
		if err != nil {
			t.Fatal(err)
		}
		id, err := decodeID(json.RawMessage(raw))
		if err != nil || id != want {
			t.Errorf("decodeID(%s) = %v, %v; want %v", raw, id, err, want)
		}
		for _, resp := range []*jsonrpc.Response{
			{ID: id, Result: json.RawMessage(`{"content":[{"type":"text","text":"<b>"}],"resultType":"complete"}`)},
			{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no <b>"}},
		} {
			got, err := encodeResponse(resp)
			wantBytes, wantErr := jsonrpc.EncodeMessage(resp)
			if err != nil || wantErr != nil || string(got) != string(wantBytes) {
				t.Errorf("id %s: encodeResponse = %s, %v; EncodeMessage = %s, %v", raw, got, err, wantBytes, wantErr)
			}
		}
	}
}

// A 2026-07-28 call of a built-in tool served directly is held to every
// check a call through the SDK's handler is: the policy (hidden without
// its scope, the step-up 403), its expression rules on the caller and on
// the arguments, a virtual server's selection, names and
// fixed arguments, an App's name resolved to the tool it stands for
// (never to a listed tool's name), and the program's middleware, which
// sees the listed name and the name used. The middleware records whether
// the request came on a session: the SDK's handler makes one per request;
// a direct call has none.
func TestOwnToolsDirectHoldEveryCheck(t *testing.T) {
	policy := func(info *sdkauth.TokenInfo, tool string) (bool, []string, bool) {
		has := func(s string) bool { return info != nil && slices.Contains(info.Scopes, s) }
		switch tool {
		case "echo", "repeat":
			return has("own:echo"), []string{"own:echo"}, true
		case "time":
			return has("own:time"), []string{"own:time"}, false
		}
		return true, nil, false
	}
	// The core toolset (its tools NoSession) and the App server c, whose
	// App calls its own tool by the name echo (listed as c_echo).
	s := &appServers{}
	cat, err := toolsets.New(toolsets.Options{Toolsets: []string{"core"}}, toolsets.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.SetSource("upstream c", s.set("c", "echo")); err != nil {
		t.Fatal(err)
	}
	endpoint := func(exposure *curation.Exposure) (*httptest.Server, *[]string) {
		var (
			mu   sync.Mutex
			seen []string
		)
		record := func(next sdk.MethodHandler) sdk.MethodHandler {
			return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
				if r, ok := req.(*sdk.CallToolRequest); ok {
					path := "direct"
					if r.Session != nil {
						path = "sdk"
					}
					mu.Lock()
					seen = append(seen, r.Params.Name+" as "+CalledAs(ctx)+" "+path)
					mu.Unlock()
				}
				return next(ctx, method, req)
			}
		}
		h := New(cat, Options{}, Deps{
			Version: "t", Policy: policy, Rules: ownRules{}, Exposure: exposure, Middleware: []sdk.Middleware{record},
			StepUp: func(w http.ResponseWriter, _ *http.Request, scopes []string) {
				w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="`+strings.Join(scopes, " ")+`"`)
				w.WriteHeader(http.StatusForbidden)
			},
		}).Handler()
		verify := func(_ context.Context, token string, _ *http.Request) (*sdkauth.TokenInfo, error) {
			var scopes []string
			if token != "-" {
				scopes = strings.Fields(strings.ReplaceAll(token, "+", " "))
			}
			return &sdkauth.TokenInfo{UserID: "u", Scopes: scopes}, nil
		}
		ts := httptest.NewServer(sdkauth.RequireBearerToken(verify, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h))
		t.Cleanup(ts.Close)
		return ts, &seen
	}
	mcpEndpoint, seenMCP := endpoint(nil)
	viewEndpoint, seenView := endpoint(&curation.Exposure{Tools: []curation.ToolSelection{
		{Source: "core", Name: "echo", ExposeAs: "repeat", FixedArguments: map[string]json.RawMessage{"text": json.RawMessage(`"fixed"`)}},
		{Source: "core", Name: "time"},
		{Source: "c", Name: "echo"},
	}})
	for _, tt := range []struct {
		name       string
		url        string
		seen       *[]string
		token      string
		tool, args string
		// want is the result's text; else status and errWant, a part of
		// the error's message (or of WWW-Authenticate, for a 403).
		want    string
		status  int
		errWant string
		// saw is what the middleware saw, "" for nothing.
		saw string
	}{
		{name: "a call", url: mcpEndpoint.URL, seen: seenMCP, token: "own:echo", tool: "echo", args: `{"text":"hi"}`,
			want: "hi", saw: "echo as  direct"},
		{name: "hidden without its scope", url: mcpEndpoint.URL, seen: seenMCP, token: "-", tool: "echo", args: `{"text":"hi"}`,
			status: http.StatusOK, errWant: `Unknown tool: "echo"`},
		{name: "the step-up without its scope", url: mcpEndpoint.URL, seen: seenMCP, token: "-", tool: "time", args: `{}`,
			status: http.StatusForbidden, errWant: "own:time"},
		{name: "a listed name never stands for an App's", url: mcpEndpoint.URL, seen: seenMCP, token: "own:echo", tool: "echo", args: `{"text":"mine"}`,
			want: "mine", saw: "echo as  direct"},
		{name: "an App's name where the view does not list it", url: viewEndpoint.URL, seen: seenView, token: "own:echo", tool: "echo", args: `{}`,
			want: "c:echo {}", saw: "c_echo as echo direct"},
		{name: "renamed, its argument fixed", url: viewEndpoint.URL, seen: seenView, token: "own:echo", tool: "repeat", args: `{}`,
			want: "fixed", saw: "repeat as  direct"},
		{name: "a fixed argument smuggled in", url: viewEndpoint.URL, seen: seenView, token: "own:echo", tool: "repeat", args: `{"TEXT":"x"}`,
			status: http.StatusBadRequest, errWant: "TEXT", saw: "repeat as  direct"},
		{name: "hidden on the view without its scope", url: viewEndpoint.URL, seen: seenView, token: "-", tool: "repeat", args: `{}`,
			status: http.StatusOK, errWant: `Unknown tool: "repeat"`},
		{name: "by its name on /mcp, which the view does not serve", url: viewEndpoint.URL, seen: seenView, token: "own:echo", tool: "calculator", args: `{}`,
			status: http.StatusOK, errWant: `Unknown tool: "calculator"`},
		{name: "a rule on the caller", url: mcpEndpoint.URL, seen: seenMCP, token: "-", tool: "calculator", args: `{"operation":"add","a":1,"b":2}`,
			status: http.StatusOK, errWant: `the policy rule "no-calculator" refuses this call`},
		{name: "a rule on the arguments", url: mcpEndpoint.URL, seen: seenMCP, token: "own:echo", tool: "echo", args: `{"text":"forbidden"}`,
			status: http.StatusOK, errWant: `the policy rule "nothing-forbidden" refuses this call`, saw: "echo as  direct"},
		{name: "the step-up on the view", url: viewEndpoint.URL, seen: seenView, token: "-", tool: "time", args: `{}`,
			status: http.StatusForbidden, errWant: "own:time"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			*tt.seen = nil
			r := appCall(t, tt.url, tt.token, modernHdr, tt.tool, tt.args, "")
			switch {
			case tt.want != "":
				if got := appText(r); got != tt.want {
					t.Errorf("%d %s, want the text %q", r.status, r.body, tt.want)
				}
			case tt.status == http.StatusForbidden:
				if r.status != tt.status || !strings.Contains(r.header.Get("WWW-Authenticate"), tt.errWant) {
					t.Errorf("%d %s %q, want the step-up 403 naming %s", r.status, r.body, r.header.Get("WWW-Authenticate"), tt.errWant)
				}
			default:
				if r.status != tt.status || !strings.Contains(errorMessage(r.message), tt.errWant) {
					t.Errorf("%d %s, want %d with an error naming %s", r.status, r.body, tt.status, tt.errWant)
				}
			}
			var saw []string
			if tt.saw != "" {
				saw = []string{tt.saw}
			}
			if !slices.Equal(*tt.seen, saw) {
				t.Errorf("the middleware saw %q, want %q", *tt.seen, saw)
			}
		})
	}
}

// ownRules refuses every call of calculator on the caller, and a call of
// echo whose arguments hold the word forbidden.
type ownRules struct{}

func (ownRules) Caller(_ context.Context, _ *sdkauth.TokenInfo, tool string) (string, bool) {
	if tool == "calculator" {
		return "no-calculator", false
	}
	return "", false
}

func (ownRules) ArgumentRules(tool string) bool { return tool == "echo" || tool == "repeat" }

func (ownRules) Arguments(_ context.Context, _ *sdkauth.TokenInfo, _, original string, args json.RawMessage) string {
	if original == "echo" && strings.Contains(string(args), "forbidden") {
		return "nothing-forbidden"
	}
	return ""
}
