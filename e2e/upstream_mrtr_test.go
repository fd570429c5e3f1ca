//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

//lint:file-ignore SA1019 the caller offers sampling and roots, which the 2026-07-28 revision deprecates and the everything-server still asks for

// TestUpstreamInputRequests: the go-sdk everything-server, stateless (so
// that it speaks 2026-07-28), behind Portcullis with auth on (dev
// issuer). Its tools that ask for input by multi-round-trip results work
// through Portcullis for a caller of either era: on 2026-07-28 the caller
// gets the input requests and a sealed requestState and retries (the SDK
// client does it by itself), on 2025-11-25 Portcullis asks the caller on
// its session. A caller that lacks a capability the upstream's tool needs
// has the upstream's -32021 reach it on both eras. The sealed state is
// the caller's and the request's: another caller, or a tampered state,
// gets -32602.
func TestUpstreamInputRequests(t *testing.T) {
	goServer := goEverythingServer(t)
	addr := fmt.Sprintf("127.0.0.1:%d", upstreamPort(t))
	startUpstreamProc(t, nil, goServer, "-http", addr, "-stateless=true")
	cfg := writeUpstreamConfig(t, fmt.Sprintf(`
upstreams:
  - name: conformance
    prefix: gosdk
    transport: http
    url: http://%s/mcp
    required: true
`, addr))
	s := startServer(t, nil, "--dev", "--config", cfg)
	awaitReady(t, s, 60*time.Second)
	alice, bob := devToken(t, s, "alice"), devToken(t, s, "bob")

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	// connect connects a caller with token on protocol version; a capable
	// caller answers elicitation (name Ada, color blue, context tests), sampling and
	// roots, counting the requests it is sent; mrtr false turns off the
	// SDK client's own retries.
	connect := func(t *testing.T, token, version string, capable, mrtr bool, asked *atomic.Int32) *sdk.ClientSession {
		t.Helper()
		opts := &sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}}
		if capable {
			opts = &sdk.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
					asked.Add(1)
					return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada", "color": "blue", "ok": true, "context": "tests"}}, nil
				},
				CreateMessageHandler: func(context.Context, *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
					asked.Add(1)
					return &sdk.CreateMessageResult{Role: "assistant", Model: "m", Content: &sdk.TextContent{Text: "Paris"}}, nil
				},
			}
		}
		if !mrtr {
			opts.MultiRoundTrip = &sdk.MultiRoundTripOptions{Disabled: true}
		}
		client := sdk.NewClient(&sdk.Implementation{Name: "mrtr-e2e", Version: "0.0.1"}, opts)
		if capable {
			client.AddRoots(&sdk.Root{URI: "file:///work", Name: "work"})
		}
		tr := &sdk.StreamableClientTransport{Endpoint: s.MCPURL(), HTTPClient: &http.Client{Transport: bearerTransport{token}}, DisableStandaloneSSE: true, MaxRetries: -1}
		cs, err := client.Connect(ctx, tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatalf("connect (protocol %s): %v", version, err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}

	for _, version := range []string{"2025-11-25", modernProtocol} {
		t.Run("era "+version, func(t *testing.T) {
			var asked atomic.Int32
			cs := connect(t, alice, version, true, true, &asked)
			for _, c := range []struct{ tool, want string }{
				{"gosdk_test_input_required_result_elicitation", "Hello, Ada!"},
				{"gosdk_test_input_required_result_sampling", "Sampling response: Paris"},
				{"gosdk_test_input_required_result_list_roots", "Client exposed 1 root(s): file:///work"},
				{"gosdk_test_input_required_result_multi_round", "Multi-round complete: Ada likes blue"},
				{"gosdk_test_input_required_result_request_state", "state-ok"},
				{"gosdk_test_input_required_result_multiple_inputs", "Paris Ada — 1 root(s) visible"},
			} {
				before := asked.Load()
				sdkCallText(t, ctx, cs, c.tool, nil, c.want)
				if asked.Load() == before && !strings.Contains(c.tool, "roots") {
					t.Errorf("%s: the caller was not asked", c.tool)
				}
			}
			gp, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "gosdk_test_input_required_result_prompt"})
			if err != nil || len(gp.Messages) != 1 || gp.Messages[0].Content.(*sdk.TextContent).Text != "Context: tests" {
				t.Fatalf("prompts/get: %v, %+v, want one message \"Context: tests\"", err, gp)
			}

			// The upstream refuses a caller without the sampling
			// capability with -32021, which reaches the caller as is.
			bare := connect(t, alice, version, false, true, nil)
			_, err = bare.CallTool(ctx, &sdk.CallToolParams{Name: "gosdk_test_missing_capability", Arguments: map[string]any{}})
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || rpcErr.Code != sdk.CodeMissingRequiredClientCapabilities {
				t.Errorf("test_missing_capability without sampling: %v, want -32021", err)
			}
			sdkCallText(t, ctx, cs, "gosdk_test_missing_capability", nil, "tool executed")
		})
	}

	t.Run("sealed state", func(t *testing.T) {
		cs := connect(t, alice, modernProtocol, true, false, nil)
		call := func(cs *sdk.ClientSession, responses sdk.InputResponseMap, state string) (*sdk.CallToolResult, error) {
			return cs.CallTool(ctx, &sdk.CallToolParams{Name: "gosdk_test_input_required_result_multi_round", Arguments: map[string]any{},
				InputResponses: responses, RequestState: state})
		}
		res, err := call(cs, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if !res.NeedsInput() || res.InputRequests["step1"] == nil {
			t.Fatalf("first round: %+v, want the upstream's input request step1", res)
		}
		state := res.RequestState
		if !strings.HasPrefix(state, "v1.") || strings.Contains(state, "round") {
			t.Errorf("requestState %q: want Portcullis's sealed state, not the upstream's", state)
		}
		name := sdk.InputResponseMap{"step1": &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}}
		var rpcErr *jsonrpc.Error
		if _, err := call(cs, name, state+"x"); !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("tampered state: %v, want -32602", err)
		}
		other := connect(t, bob, modernProtocol, true, false, nil)
		if _, err := call(other, name, state); !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("alice's state sent by bob: %v, want -32602", err)
		}
		res, err = call(cs, name, state)
		if err != nil || !res.NeedsInput() || res.InputRequests["step2"] == nil {
			t.Fatalf("second round: %+v, %v, want the upstream's input request step2", res, err)
		}
	})
}
