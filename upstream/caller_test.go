//lint:file-ignore SA1019 the 2026-07-28 revision deprecates MCP logging, sampling and roots; callers and upstreams of every revision still use them, and this file passes on what the caller declared

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// seenClient is what the capsBackend saw of its client in one request.
type seenClient struct {
	Capabilities map[string]any `json:"capabilities"`
	ClientName   string         `json:"clientName"`
	LogLevel     string         `json:"logLevel"`
	MetaKeys     []string       `json:"metaKeys"`
}

// describeClient reports what a request says about its client: the
// capabilities and client info the SDK reads from the request (its _meta
// on 2026-07-28), the log level in its _meta, and its _meta keys.
func describeClient[P sdk.Params](req *sdk.ServerRequest[P], meta sdk.Meta) string {
	var s seenClient
	if c := req.ClientCapabilities(); c != nil {
		// The wire form: what the upstream would read.
		b, _ := json.Marshal(c)
		_ = json.Unmarshal(b, &s.Capabilities)
		if c.RootsV2 == nil {
			delete(s.Capabilities, "roots") // the SDK's struct encodes {} for none
		}
	}
	if info := req.ClientInfo(); info != nil {
		s.ClientName = info.Name
	}
	s.LogLevel, _ = meta[sdk.MetaKeyLogLevel].(string)
	for k := range meta {
		s.MetaKeys = append(s.MetaKeys, k)
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// capsBackend returns an upstream server whose tool "client", prompt
// "client" and resource "mem://client" answer with what they saw of the
// client (describeClient), and whose tool "needs_sampling" refuses a
// client without the sampling capability with -32021, as the go-sdk's
// conformance server's test_missing_capability does.
func capsBackend() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "caps"}, nil)
	s.AddTool(&sdk.Tool{Name: "client", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: describeClient(req, req.Params.Meta)}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "needs_sampling", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if c := req.ClientCapabilities(); c != nil && c.Sampling != nil {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "executed"}}}, nil
		}
		data, _ := json.Marshal(sdk.MissingRequiredClientCapabilityData{RequiredCapabilities: &sdk.ClientCapabilities{Sampling: &sdk.SamplingCapabilities{}}})
		return nil, &jsonrpc.Error{Code: sdk.CodeMissingRequiredClientCapabilities, Message: "sampling capability required but not declared by client", Data: data}
	})
	s.AddPrompt(&sdk.Prompt{Name: "client"}, func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: describeClient(req, req.Params.Meta)}}}}, nil
	})
	s.AddResource(&sdk.Resource{URI: "mem://client", Name: "client"}, func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: describeClient(req, req.Params.Meta)}}}, nil
	})
	return s
}

// startCaps starts a Manager with capsBackend as upstream "be", its
// session on protocol version upVersion.
func startCaps(t *testing.T, f *front, upVersion string) {
	t.Helper()
	startBackend(t, f, capsBackend(), upVersion)
}

// samplingCaller declares the sampling capability (the SDK client does
// when it has a handler) and roots (the SDK client's default); the caller
// without it declares none.
var samplingCaller = &sdk.ClientOptions{
	CreateMessageHandler: func(context.Context, *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
		return nil, errors.New("not asked in this test")
	},
}

// An upstream on 2026-07-28 sees, in each request Portcullis sends on a
// caller's behalf, the caller's client capabilities, client info and log
// level, not those of Portcullis's own client (which offers sampling and
// elicitation, so that it can pass them on, and is named "portcullis").
func TestCallerCapabilitiesGoUpstream(t *testing.T) {
	for _, upEra := range hopEras {
		t.Run("upstream "+upEra, func(t *testing.T) { testCallerCapabilitiesGoUpstream(t, upEra) })
	}
}

func testCallerCapabilitiesGoUpstream(t *testing.T, upEra string) {
	f := newFront(t)
	startCaps(t, f, upEra)
	for _, callerEra := range []string{"2026-07-28", "2025-11-25"} {
		for _, sampling := range []bool{false, true} {
			t.Run(fmt.Sprintf("caller %s sampling %t", callerEra, sampling), func(t *testing.T) {
				opts := &sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}}
				if sampling {
					opts = samplingCaller
				}
				cs := f.caller(t, opts, callerEra)
				var meta sdk.Meta
				wantLevel := "debug" // an older-era caller's session level filters
				if callerEra >= statelessEra {
					meta, wantLevel = sdk.Meta{sdk.MetaKeyLogLevel: "warning", "authorization": "Bearer caller-token"}, "warning"
				}
				tool, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_client", Arguments: map[string]any{}, Meta: meta})
				if err != nil || tool.IsError {
					t.Fatalf("tools/call: %v %q", err, text(tool))
				}
				prompt, err := cs.GetPrompt(callCtx(t), &sdk.GetPromptParams{Name: "be_client", Meta: meta})
				if err != nil {
					t.Fatalf("prompts/get: %v", err)
				}
				resource, err := cs.ReadResource(callCtx(t), &sdk.ReadResourceParams{URI: "mem://client", Meta: meta})
				if err != nil {
					t.Fatalf("resources/read: %v", err)
				}
				for what, got := range map[string]string{
					"tools/call":     text(tool),
					"prompts/get":    prompt.Messages[0].Content.(*sdk.TextContent).Text,
					"resources/read": resource.Contents[0].Text,
				} {
					var seen seenClient
					if err := json.Unmarshal([]byte(got), &seen); err != nil {
						t.Fatalf("%s: %v in %q", what, err, got)
					}
					if _, ok := seen.Capabilities["sampling"]; ok != sampling {
						t.Errorf("%s: the upstream saw capabilities %v; sampling there: %t, want %t (the caller's)", what, seen.Capabilities, ok, sampling)
					}
					if _, ok := seen.Capabilities["roots"]; ok != sampling {
						t.Errorf("%s: the upstream saw capabilities %v; roots there: %t, want %t (the caller's)", what, seen.Capabilities, ok, sampling)
					}
					for _, k := range []string{"elicitation", "extensions"} {
						if _, ok := seen.Capabilities[k]; ok {
							t.Errorf("%s: the upstream saw capabilities %v with %s, which the caller did not declare or Portcullis does not pass on", what, seen.Capabilities, k)
						}
					}
					if seen.ClientName != "caller" {
						t.Errorf("%s: the upstream saw client %q, want the caller's (\"caller\")", what, seen.ClientName)
					}
					if seen.LogLevel != wantLevel {
						t.Errorf("%s: the upstream saw log level %q, want %q", what, seen.LogLevel, wantLevel)
					}
					for _, k := range seen.MetaKeys {
						if !strings.HasPrefix(k, "io.modelcontextprotocol/") {
							t.Errorf("%s: the upstream saw _meta key %q of the caller's", what, k)
						}
					}
				}
			})
		}
	}
}

// An upstream on 2026-07-28 refuses a call that needs a capability the
// caller did not declare with -32021, and that error reaches the caller
// as a JSON-RPC error with its data, as it would directly; a caller that
// declared the capability has the call run.
func TestMissingCapabilityReachesTheCaller(t *testing.T) {
	for _, upEra := range hopEras {
		t.Run("upstream "+upEra, func(t *testing.T) { testMissingCapabilityReachesTheCaller(t, upEra) })
	}
}

func testMissingCapabilityReachesTheCaller(t *testing.T, upEra string) {
	f := newFront(t)
	startCaps(t, f, upEra)
	for _, callerEra := range []string{"2026-07-28", "2025-11-25"} {
		t.Run("caller "+callerEra, func(t *testing.T) {
			without := f.caller(t, &sdk.ClientOptions{}, callerEra)
			res, err := without.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_needs_sampling", Arguments: map[string]any{}})
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || rpcErr.Code != sdk.CodeMissingRequiredClientCapabilities {
				t.Fatalf("without sampling: %v, %v; want JSON-RPC error %d", res, err, sdk.CodeMissingRequiredClientCapabilities)
			}
			var data sdk.MissingRequiredClientCapabilityData
			if err := json.Unmarshal(rpcErr.Data, &data); err != nil || data.RequiredCapabilities == nil || data.RequiredCapabilities.Sampling == nil {
				t.Errorf("the error's data %s does not name sampling as required (%v)", rpcErr.Data, err)
			}
			with := f.caller(t, samplingCaller, callerEra)
			res, err = with.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_needs_sampling", Arguments: map[string]any{}})
			if err != nil || res.IsError || text(res) != "executed" {
				t.Errorf("with sampling: %v %q, want the tool to run", err, text(res))
			}
		})
	}
}

// An upstream of an older era reads the client from its session, which
// is Portcullis's: no per-request keys are added for it.
func TestNoCallerMetaForOlderUpstreams(t *testing.T) {
	f := newFront(t)
	startCaps(t, f, "2025-11-25")
	cs := f.caller(t, &sdk.ClientOptions{}, "2026-07-28")
	res, err := cs.CallTool(callCtx(t), &sdk.CallToolParams{Name: "be_client", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("tools/call: %v %q", err, text(res))
	}
	var seen seenClient
	if err := json.Unmarshal([]byte(text(res)), &seen); err != nil {
		t.Fatal(err)
	}
	if len(seen.MetaKeys) != 0 || seen.ClientName != "portcullis" {
		t.Errorf("the upstream saw _meta keys %v and client %q, want none and Portcullis's session", seen.MetaKeys, seen.ClientName)
	}
}
