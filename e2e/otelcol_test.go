//go:build e2e

package e2e

// End-to-end tracing: the real binary
// exports its spans over OTLP, configured only by the standard OTEL_*
// variables, to a real OpenTelemetry Collector (otelcol-portcullis, built
// by scripts/install-otelcol.sh). The collector batches them and forwards
// them with its OTLP/HTTP exporter to an httptest server in the test, which
// decodes the OTLP protobuf. So the spans the test reads are the ones a
// production collector would have received.

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpSink is an OTLP/HTTP trace endpoint that keeps what it receives.
type otlpSink struct {
	mu    sync.Mutex
	spans []exportedSpan
	errs  []string
}

// exportedSpan is one span with the resource it came with.
type exportedSpan struct {
	Resource map[string]string
	Span     *tracepb.Span
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req coltracepb.ExportTraceServiceRequest
	err := readOTLP(r, "/v1/traces", &req)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errs = append(s.errs, err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rs := range req.GetResourceSpans() {
		res := attrMap(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.spans = append(s.spans, exportedSpan{Resource: res, Span: sp})
			}
		}
	}
	writeOTLP(w, &coltracepb.ExportTraceServiceResponse{})
}

// readOTLP reads an OTLP/HTTP export request, a POST to path, into req.
func readOTLP(r *http.Request, path string, req proto.Message) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	if r.Method != http.MethodPost || r.URL.Path != path {
		return fmt.Errorf("unexpected %s %s", r.Method, r.URL.Path)
	}
	return proto.Unmarshal(body, req)
}

// writeOTLP answers an OTLP/HTTP export with resp.
func writeOTLP(w http.ResponseWriter, resp proto.Message) {
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// snapshot returns the spans received so far and any decoding errors.
func (s *otlpSink) snapshot() ([]exportedSpan, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.spans), slices.Clone(s.errs)
}

// attrMap flattens OTLP attributes to strings (ints and bools printed).
func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.GetStringValue()
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetBoolValue())
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}

// startCollector runs otelcol-portcullis with its OTLP receiver on two free
// ports and its OTLP/HTTP exporter pointed at sink. It returns the
// receiver's HTTP and gRPC addresses.
func startCollector(t *testing.T, sink http.Handler) (httpAddr, grpcAddr string) {
	t.Helper()
	httpAddr, grpcAddr, _ = startCollectorFor(t, sink, "traces")
	return httpAddr, grpcAddr
}

// startCollectorFor is startCollector with a pipeline for signal (traces
// or logs), and returns the collector's process too, for a test that
// stops it.
func startCollectorFor(t *testing.T, sink http.Handler, signal string) (httpAddr, grpcAddr string, proc *process) {
	t.Helper()
	bin := obsBinary(t, "otelcol-portcullis")
	out := httptest.NewServer(sink)
	t.Cleanup(out.Close)
	addrs := startOnFreePorts(t, 2, func(addrs []string) (*process, error) {
		cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
      grpc:
        endpoint: %s
processors:
  batch:
    timeout: 100ms
exporters:
  otlphttp:
    endpoint: %s
    compression: none
    encoding: proto
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    %s:
      receivers: [otlp]
      processors: [batch]
      exporters: [otlphttp]
`, addrs[0], addrs[1], out.URL, signal)
		path := filepath.Join(t.TempDir(), "otelcol.yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := tryStartProcess(t, "otelcol-portcullis", "Everything is ready", bin, "--config", "file:"+path)
		proc = p
		return p, err
	})
	return addrs[0], addrs[1], proc
}

func TestTracesReachOpenTelemetryCollector(t *testing.T) {
	for _, tt := range []struct {
		name     string
		protocol string // OTEL_EXPORTER_OTLP_PROTOCOL
		grpc     bool   // export to the receiver's gRPC port
		enduser  bool   // telemetry.record_enduser_id
	}{
		{name: "http/protobuf", protocol: "http/protobuf", enduser: true},
		{name: "grpc", protocol: "grpc", grpc: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sink := &otlpSink{}
			httpAddr, grpcAddr := startCollector(t, sink)
			endpoint := "http://" + httpAddr
			if tt.grpc {
				endpoint = "http://" + grpcAddr
			}
			// --dev turns auth on with an embedded issuer, so the spans
			// carry the caller's subject as enduser.id when that is
			// turned on, and no enduser.id by default.
			d := startDevServer(t,
				"OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint,
				"OTEL_EXPORTER_OTLP_PROTOCOL="+tt.protocol,
				"OTEL_TRACES_SAMPLER=always_on",
				fmt.Sprintf("PORTCULLIS_TELEMETRY_RECORD_ENDUSER_ID=%t", tt.enduser),
			)
			m := regexp.MustCompile(`(?m)^\s*export MCP_TOKEN=(\S+)\s*$`).FindStringSubmatch(d.Banner)
			if m == nil {
				t.Fatalf("no `export MCP_TOKEN=…` line in the dev banner:\n%s", d.Banner)
			}
			token := m[1]
			_, claims := decodeJWT(t, token)
			subject, _ := claims["sub"].(string)
			if subject == "" {
				t.Fatalf("dev token has no sub: %v", claims)
			}

			h := legacySession(t, d.MCPURL(), token, "2025-11-25")
			sessionID := h.Get("Mcp-Session-Id")
			if sessionID == "" {
				t.Fatal("the legacy session has no Mcp-Session-Id")
			}

			// 1. The client's trace context in params._meta.traceparent.
			const metaTrace, metaParent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
			res := callTool(t, d.MCPURL(), h, 11, "echo", `{"text":"traced in _meta"}`,
				fmt.Sprintf(`,"_meta":{"traceparent":"00-%s-%s-01"}`, metaTrace, metaParent))
			if res.Error != nil {
				t.Fatalf("echo with _meta.traceparent: %+v", res.Error)
			}
			// 2. The client's trace context in the traceparent header only.
			const headerTrace, headerParent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
			hh := h.Clone()
			hh.Set("Traceparent", fmt.Sprintf("00-%s-%s-01", headerTrace, headerParent))
			if res := callTool(t, d.MCPURL(), hh, 12, "echo", `{"text":"traced in the header"}`, ""); res.Error != nil {
				t.Fatalf("echo with a traceparent header: %+v", res.Error)
			}
			// 3. A call that fails: an unregistered tool.
			const errTrace = "5b8efff798038103d269b633813fc60c"
			he := h.Clone()
			he.Set("Traceparent", "00-"+errTrace+"-eee19b7ec3c1b174-01")
			failed := callTool(t, d.MCPURL(), he, 13, "no_such_tool", `{}`, "")

			// SIGTERM flushes the span queue before the process exits.
			d.Signal(t, syscall.SIGTERM)
			select {
			case <-d.Done():
				if err := d.ExitErr(); err != nil {
					t.Errorf("portcullis exited with %v after SIGTERM", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("portcullis did not exit within 20s of SIGTERM")
			}

			// The collector batches for 100ms; wait for all three traces.
			var spans []exportedSpan
			if !poll(30*time.Second, 50*time.Millisecond, func() bool {
				var errs []string
				spans, errs = sink.snapshot()
				if len(errs) > 0 {
					t.Fatalf("the test's OTLP sink could not decode what the collector sent: %v", errs)
				}
				return hasTraces(spans, metaTrace, headerTrace, errTrace)
			}) {
				t.Fatalf("the collector did not forward spans of traces %s, %s and %s within 30s; got %d span(s):\n%s",
					metaTrace, headerTrace, errTrace, len(spans), describeSpans(spans))
			}

			for _, s := range spans {
				if got := s.Resource["service.name"]; got != "portcullis" {
					t.Errorf("span %q: resource service.name = %q, want portcullis", s.Span.GetName(), got)
				}
			}

			// The MCP span under _meta.traceparent.
			meta := findSpan(t, spans, metaTrace, "tools/call echo")
			if got := hex.EncodeToString(meta.GetParentSpanId()); got != metaParent {
				t.Errorf("tools/call echo (in _meta): parent span id = %s, want %s from params._meta.traceparent", got, metaParent)
			}
			wantAttrs := map[string]string{
				"mcp.method.name":       "tools/call",
				"gen_ai.tool.name":      "echo",
				"gen_ai.operation.name": "execute_tool",
				"jsonrpc.request.id":    "11",
				"mcp.protocol.version":  "2025-11-25",
				"mcp.session.id":        sessionID,
				"network.transport":     "tcp",
				"enduser.id":            "", // absent
			}
			if tt.enduser {
				wantAttrs["enduser.id"] = subject
			}
			checkServerSpan(t, meta, wantAttrs)
			if meta.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("tools/call echo: status ERROR (%s), want unset or OK", meta.GetStatus().GetMessage())
			}

			// The MCP span under the header's trace context: its parent is
			// the HTTP server span, whose parent is the client's span.
			mcpSpan := findSpan(t, spans, headerTrace, "tools/call echo")
			wantAttrs["jsonrpc.request.id"] = "12"
			checkServerSpan(t, mcpSpan, wantAttrs)
			var httpSpan *tracepb.Span
			for _, s := range spans {
				if hex.EncodeToString(s.Span.GetTraceId()) == headerTrace && string(s.Span.GetSpanId()) == string(mcpSpan.GetParentSpanId()) {
					httpSpan = s.Span
				}
			}
			switch {
			case httpSpan == nil:
				t.Errorf("tools/call echo (header): parent %x is not a span of trace %s:\n%s", mcpSpan.GetParentSpanId(), headerTrace, describeSpans(spans))
			default:
				if httpSpan.GetKind() != tracepb.Span_SPAN_KIND_SERVER || !strings.Contains(httpSpan.GetName(), "/mcp") {
					t.Errorf("the MCP span's parent is %q (%v), want the HTTP server span \"POST /mcp\"", httpSpan.GetName(), httpSpan.GetKind())
				}
				if got := hex.EncodeToString(httpSpan.GetParentSpanId()); got != headerParent {
					t.Errorf("HTTP span %q: parent span id = %s, want %s from the traceparent header", httpSpan.GetName(), got, headerParent)
				}
			}

			// The failed call: no target in the name (the tool is not
			// registered), error.type set, status ERROR.
			errSpan := findSpan(t, spans, errTrace, "tools/call")
			if errSpan.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
				t.Errorf("tools/call no_such_tool: kind %v, want SERVER", errSpan.GetKind())
			}
			if errSpan.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("tools/call no_such_tool: status %v, want ERROR", errSpan.GetStatus().GetCode())
			}
			attrs := attrMap(errSpan.GetAttributes())
			wantType := "tool_error"
			if failed.Error != nil {
				wantType = fmt.Sprint(failed.Error.Code)
			}
			if attrs["error.type"] != wantType {
				t.Errorf("tools/call no_such_tool: error.type = %q, want %q (the response was %+v)", attrs["error.type"], wantType, failed)
			}
		})
	}
}

// hasTraces reports whether spans holds a span of each trace id.
func hasTraces(spans []exportedSpan, traceIDs ...string) bool {
	for _, id := range traceIDs {
		if !slices.ContainsFunc(spans, func(s exportedSpan) bool { return hex.EncodeToString(s.Span.GetTraceId()) == id }) {
			return false
		}
	}
	return true
}

// findSpan returns the one span of trace traceID named name.
func findSpan(t *testing.T, spans []exportedSpan, traceID, name string) *tracepb.Span {
	t.Helper()
	var found []*tracepb.Span
	for _, s := range spans {
		if hex.EncodeToString(s.Span.GetTraceId()) == traceID && s.Span.GetName() == name {
			found = append(found, s.Span)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one span %q in trace %s, found %d among:\n%s", name, traceID, len(found), describeSpans(spans))
	}
	return found[0]
}

// checkServerSpan checks that sp is of kind SERVER and has the attributes want.
func checkServerSpan(t *testing.T, sp *tracepb.Span, want map[string]string) {
	t.Helper()
	if sp.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("span %q: kind %v, want SERVER", sp.GetName(), sp.GetKind())
	}
	got := attrMap(sp.GetAttributes())
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %q: attribute %s = %q, want %q (all: %v)", sp.GetName(), k, got[k], v, got)
		}
	}
}

// describeSpans lists spans one a line for failure messages.
func describeSpans(spans []exportedSpan) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  trace %x span %x parent %x %v %q %v\n", s.Span.GetTraceId(), s.Span.GetSpanId(),
			s.Span.GetParentSpanId(), s.Span.GetKind(), s.Span.GetName(), attrMap(s.Span.GetAttributes()))
	}
	return b.String()
}
