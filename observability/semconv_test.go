package observability

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestSemconvAttributes checks span attributes and operation labels of the
// MCP semantic conventions over a transport without HTTP (as stdio), and
// that enduser.id stays off spans unless asked for.
func TestSemconvAttributes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, BuildInfo{})
	exp := tracetest.NewInMemoryExporter()
	tr := &Tracing{Provider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), Propagator: propagation.TraceContext{}, Enabled: true}
	s := newServer(t, MCPOptions{Metrics: m, Tracing: tr})
	cs := connect(t, s)
	ctx := context.Background()
	if _, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "greet"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "no-such-prompt"}); err == nil {
		t.Fatal("an unknown prompt was served")
	}
	// Arguments of the wrong type: the SDK answers with an error result,
	// a tool-level error.
	if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"text": 5}`)}); err != nil || !res.IsError {
		t.Fatalf("invalid arguments: %v, %v; want an error result", res, err)
	}
	// An unknown tool: the SDK answers the JSON-RPC error -32602.
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "nope"}); err == nil {
		t.Fatal("an unknown tool was called")
	}

	byName := map[string]tracetest.SpanStub{}
	for _, sp := range exp.GetSpans() {
		byName[sp.Name] = sp
	}
	version := cs.InitializeResult().ProtocolVersion
	tests := []struct {
		name   string
		span   string
		want   map[string]string
		status codes.Code
	}{
		{"discover", "server/discover", map[string]string{"mcp.protocol.version": version, "network.transport": "pipe"}, codes.Unset},
		{"prompt", "prompts/get greet", map[string]string{"gen_ai.prompt.name": "greet", "mcp.protocol.version": version}, codes.Unset},
		{"invalid arguments are a tool error", "tools/call echo", map[string]string{
			"error.type": "tool_error", "gen_ai.operation.name": "execute_tool",
		}, codes.Error},
		{"invalid params reply is its JSON-RPC code", "tools/call", map[string]string{
			"error.type": "-32602", "rpc.response.status_code": "-32602", "gen_ai.tool.name": "nope",
		}, codes.Error},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp, ok := byName[tt.span]
			if !ok {
				t.Fatalf("no span %q in %v", tt.span, names(exp.GetSpans()))
			}
			got := attrs(sp.Attributes)
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if _, ok := got["enduser.id"]; ok {
				t.Error("enduser.id is set without RecordEnduserID")
			}
			if sp.Status.Code != tt.status {
				t.Errorf("status %v, want %v", sp.Status.Code, tt.status)
			}
		})
	}

	series := map[string]bool{}
	for _, l := range seriesLabels(t, reg, "mcp_server_operation_duration_seconds") {
		series[l] = true
	}
	for _, want := range []string{
		`error_type="",gen_ai_operation_name="",gen_ai_prompt_name="greet",gen_ai_tool_name="",mcp_method_name="prompts/get",mcp_protocol_version="` + version + `",network_transport="pipe",portcullis_server="root",portcullis_tool_original="",rpc_response_status_code=""`,
		`error_type="-32602",gen_ai_operation_name="",gen_ai_prompt_name="_OTHER",gen_ai_tool_name="",mcp_method_name="prompts/get",mcp_protocol_version="` + version + `",network_transport="pipe",portcullis_server="root",portcullis_tool_original="",rpc_response_status_code="-32602"`,
		`error_type="tool_error",gen_ai_operation_name="execute_tool",gen_ai_prompt_name="",gen_ai_tool_name="echo",mcp_method_name="tools/call",mcp_protocol_version="` + version + `",network_transport="pipe",portcullis_server="root",portcullis_tool_original="",rpc_response_status_code=""`,
		`error_type="-32602",gen_ai_operation_name="execute_tool",gen_ai_prompt_name="",gen_ai_tool_name="_OTHER",mcp_method_name="tools/call",mcp_protocol_version="` + version + `",network_transport="pipe",portcullis_server="root",portcullis_tool_original="",rpc_response_status_code="-32602"`,
	} {
		if !series[want] {
			t.Errorf("no series %s in %v", want, series)
		}
	}
}

// TestInitializeSpan checks that a legacy initialize over HTTP, which
// carries no protocol header, has the protocol version on its span.
func TestInitializeSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr := &Tracing{Provider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), Propagator: propagation.TraceContext{}, Enabled: true}
	s := newServer(t, MCPOptions{Tracing: tr})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{JSONResponse: true}))
	defer srv.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: HTTP %d", resp.StatusCode)
	}
	for _, sp := range exp.GetSpans() {
		if sp.Name != "initialize" {
			continue
		}
		got := attrs(sp.Attributes)
		if got["mcp.protocol.version"] != "2025-06-18" || got["network.transport"] != "tcp" {
			t.Errorf("initialize span attributes %v, want mcp.protocol.version 2025-06-18 and network.transport tcp", got)
		}
		return
	}
	t.Fatalf("no initialize span in %v", names(exp.GetSpans()))
}
