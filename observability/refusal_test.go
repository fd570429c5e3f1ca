package observability

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestRefusals checks that a request refused before the SDK is counted in
// the operation metric and spanned with its error.type, and that one the
// SDK serves is left to the MCP middleware.
func TestRefusals(t *testing.T) {
	tests := []struct {
		name   string
		method string
		header map[string]string
		// server and original name the virtual server and its renamed
		// tools; empty and nil for the root server.
		server   string
		original func(string) string
		handler  http.HandlerFunc
		// want is the operation series' labels, empty when the request must
		// not be recorded.
		want   string
		status string // rpc.response.status_code on the span
	}{
		{
			name: "limit refuses with 429", method: http.MethodPost,
			header:  map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "echo", "Mcp-Protocol-Version": "2026-07-28"},
			handler: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "slow down", http.StatusTooManyRequests) },
			want:    `error_type="429",gen_ai_operation_name="execute_tool",gen_ai_prompt_name="",gen_ai_tool_name="echo",mcp_method_name="tools/call",mcp_protocol_version="2026-07-28",network_transport="tcp",portcullis_server="root",portcullis_tool_original="",rpc_response_status_code=""`,
		},
		{
			name: "handler writes a JSON-RPC parse error", method: http.MethodPost,
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.(interface{ RecordJSONRPCError(int) }).RecordJSONRPCError(-32700)
				w.WriteHeader(http.StatusBadRequest)
			},
			want:   `error_type="-32700",gen_ai_operation_name="",gen_ai_prompt_name="",gen_ai_tool_name="",mcp_method_name="_OTHER",mcp_protocol_version="",network_transport="tcp",portcullis_server="root",portcullis_tool_original="",rpc_response_status_code="-32700"`,
			status: "-32700",
		},
		{
			name: "policy denial answered with 200", method: http.MethodPost,
			header: map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "secret"},
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.(interface{ RecordJSONRPCError(int) }).RecordJSONRPCError(-32602)
				w.WriteHeader(http.StatusOK)
			},
			want:   `error_type="-32602",gen_ai_operation_name="execute_tool",gen_ai_prompt_name="",gen_ai_tool_name="_OTHER",mcp_method_name="tools/call",mcp_protocol_version="",network_transport="tcp",portcullis_server="root",portcullis_tool_original="",rpc_response_status_code="-32602"`,
			status: "-32602",
		},
		{
			name: "limit refuses with 429 on a virtual server, a renamed tool", method: http.MethodPost,
			header: map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "echo", "Mcp-Protocol-Version": "2026-07-28"},
			server: "team-a", original: func(n string) string { return "upstream_" + n },
			handler: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "slow down", http.StatusTooManyRequests) },
			want:    `error_type="429",gen_ai_operation_name="execute_tool",gen_ai_prompt_name="",gen_ai_tool_name="echo",mcp_method_name="tools/call",mcp_protocol_version="2026-07-28",network_transport="tcp",portcullis_server="team-a",portcullis_tool_original="upstream_echo",rpc_response_status_code=""`,
		},
		{
			name: "served by the SDK", method: http.MethodPost,
			handler: func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{}`)) },
		},
		{
			name: "GET stream refused", method: http.MethodGet,
			handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusMethodNotAllowed) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := NewMetrics(reg, BuildInfo{})
			exp := tracetest.NewInMemoryExporter()
			tr := &Tracing{Provider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), Propagator: propagation.TraceContext{}, Enabled: true}
			h := Refusals(RefusalOptions{
				Metrics: m, Tracing: tr, KnownTool: func(n string) bool { return n == "echo" },
				Server: tt.server, OriginalTool: tt.original,
			})(tt.handler)
			req := httptest.NewRequest(tt.method, "/mcp", strings.NewReader(`{}`))
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			h.ServeHTTP(httptest.NewRecorder(), req)

			n := testutil.CollectAndCount(reg, "mcp_server_operation_duration_seconds")
			spans := exp.GetSpans()
			if tt.want == "" {
				if n != 0 || len(spans) != 0 {
					t.Fatalf("recorded %d series and %d spans, want none", n, len(spans))
				}
				return
			}
			got := seriesLabels(t, reg, "mcp_server_operation_duration_seconds")
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("series %q, want one with %s", got, tt.want)
			}
			if len(spans) != 1 {
				t.Fatalf("%d spans, want 1", len(spans))
			}
			s := spans[0]
			a := attrs(s.Attributes)
			if s.SpanKind != trace.SpanKindServer || s.Status.Code != codes.Error || a["error.type"] == "" || a["network.transport"] != "tcp" {
				t.Errorf("span %q kind %v status %v attrs %v, want SERVER, Error, error.type and network.transport", s.Name, s.SpanKind, s.Status.Code, a)
			}
			if a["rpc.response.status_code"] != tt.status {
				t.Errorf("rpc.response.status_code %q, want %q", a["rpc.response.status_code"], tt.status)
			}
			if a["portcullis.server"] != tt.server {
				t.Errorf("portcullis.server %q, want %q", a["portcullis.server"], tt.server)
			}
		})
	}
}

// seriesLabels returns the label sets of a metric's series, as
// name="value" pairs joined by commas in name order.
func seriesLabels(t *testing.T, reg *prometheus.Registry, name string) []string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var pairs []string
			for _, l := range m.GetLabel() {
				pairs = append(pairs, l.GetName()+`="`+l.GetValue()+`"`)
			}
			out = append(out, strings.Join(pairs, ","))
		}
	}
	return out
}

// TestTaskAnswersAreOperations checks that a tasks extension request the
// MCP handler answers itself is an operation without error, whose span
// links to the trace of the call that created the task.
func TestTaskAnswersAreOperations(t *testing.T) {
	const creator = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tt := range []struct {
		name     string
		link     string
		wantLink bool
	}{
		{name: "tasks/get links to the creating call", link: creator, wantLink: true},
		{name: "no link", link: ""},
		{name: "malformed link ignored", link: "00-zz-yy-01"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := NewMetrics(reg, BuildInfo{})
			exp := tracetest.NewInMemoryExporter()
			tr := &Tracing{Provider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), Propagator: propagation.TraceContext{}, Enabled: true}
			h := Refusals(RefusalOptions{Metrics: m, Tracing: tr})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.(interface{ RecordAnswered(string) }).RecordAnswered(tt.link)
				w.Write([]byte(`{}`))
			}))
			req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{}`))
			req.Header.Set("Mcp-Method", "tasks/get")
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			h.ServeHTTP(httptest.NewRecorder(), req)

			want := `error_type="",gen_ai_operation_name="",gen_ai_prompt_name="",gen_ai_tool_name="",mcp_method_name="tasks/get",mcp_protocol_version="2026-07-28",network_transport="tcp",portcullis_server="root",portcullis_tool_original="",rpc_response_status_code=""`
			if got := seriesLabels(t, reg, "mcp_server_operation_duration_seconds"); len(got) != 1 || got[0] != want {
				t.Errorf("series %q, want one with %s", got, want)
			}
			spans := exp.GetSpans()
			if len(spans) != 1 {
				t.Fatalf("%d spans, want 1", len(spans))
			}
			s := spans[0]
			if s.Status.Code == codes.Error || s.Name != "tasks/get" {
				t.Errorf("span %q status %v, want tasks/get without error", s.Name, s.Status.Code)
			}
			if got := len(s.Links); (got == 1) != tt.wantLink || got > 1 {
				t.Fatalf("%d links, want link=%v", got, tt.wantLink)
			}
			if tt.wantLink && s.Links[0].SpanContext.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
				t.Errorf("link to trace %s", s.Links[0].SpanContext.TraceID())
			}
		})
	}
}

// TestDispatchedErrorsAreOneOperation checks that a request the SDK
// dispatched and answered with an error whose HTTP status is 400 (on
// 2026-07-28, SEP-2575: invalid params, a missing client capability) is
// one operation, recorded by the MCP middleware, and not a refusal too.
func TestDispatchedErrorsAreOneOperation(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, BuildInfo{})
	known := func(n string) bool { return n == "picky" }
	s := sdk.NewServer(&sdk.Implementation{Name: "t"}, nil)
	s.AddTool(&sdk.Tool{Name: "picky", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no"}
	})
	s.AddReceivingMiddleware(MCPMiddleware(MCPOptions{Metrics: m, KnownTool: known}))
	h := Refusals(RefusalOptions{Metrics: m, KnownTool: known})(
		sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"picky","arguments":{},"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	for k, v := range map[string]string{
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "picky",
	} {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "-32602") {
		t.Fatalf("answer %d %s, want 400 with -32602", rec.Code, rec.Body)
	}
	got := seriesLabels(t, reg, "mcp_server_operation_duration_seconds")
	want := `error_type="-32602",gen_ai_operation_name="execute_tool",gen_ai_prompt_name="",gen_ai_tool_name="picky",mcp_method_name="tools/call",mcp_protocol_version="2026-07-28",network_transport="tcp",portcullis_server="root",portcullis_tool_original="",rpc_response_status_code="-32602"`
	if len(got) != 1 || got[0] != want {
		t.Errorf("series %q, want only %s", got, want)
	}
}
