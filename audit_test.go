package portcullis

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/audit"
	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
	"github.com/portcullis-mcp/portcullis/mcp"
	"github.com/portcullis-mcp/portcullis/observability"
)

// auditEvent is an audit event as a SIEM reads it.
type auditEvent struct {
	Schema, ID, Time, Type, Outcome string
	Actor                           struct {
		Issuer, Subject string
		ClientID        string `json:"client_id"`
	}
	TraceID                    string `json:"trace_id"`
	Server, Tool, Reason, Rule string
	ToolOriginal               string `json:"tool_original"`
	ToolCalledAs               string `json:"tool_called_as"`
	DurationUS                 *int64 `json:"duration_us"`
	Arguments                  json.RawMessage
	Detail                     map[string]string
}

// readAuditEvents reads the JSON lines of path until want returns true or
// the deadline passes.
func readAuditEvents(t *testing.T, path string, want func([]auditEvent) bool) ([]auditEvent, string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		raw, _ := os.ReadFile(path)
		var events []auditEvent
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			if line == "" {
				continue
			}
			var e auditEvent
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("an audit line is not JSON: %v\n%s", err, line)
			}
			events = append(events, e)
		}
		if want(events) || time.Now().After(deadline) {
			return events, string(raw)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAuditEvents runs serve --dev with audit events going to a file and
// to a syslog receiver: the configuration, a call with its arguments
// recorded and one redacted, a call a rule refuses and a request without
// a valid token each become one event of the schema, the same on both
// sinks, and none holds the token or the redacted value.
func TestAuditEvents(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	syslog := make(chan string, 100)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			n, err := br.ReadString(' ')
			if err != nil {
				return
			}
			size, _ := strconv.Atoi(strings.TrimSpace(n))
			msg := make([]byte, size)
			if _, err := io.ReadFull(br, msg); err != nil {
				return
			}
			syslog <- string(msg)
		}
	}()
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := writeConfig(t, `
auth:
  policy:
    - tool: echo
      rules:
        - name: short
          allow: size(args.text) <= 10
audit:
  sinks:
    - type: file
      path: `+file+`
    - type: syslog
      address: `+ln.Addr().String()+`
  tools:
    - tool: echo
      arguments: true
      redact: [text]
`)
	base, issuer, metricsURL := startDevMetrics(t, "--config", cfg)
	resource := base + "/mcp"
	token := devToken(t, issuer, "audit-test", resource, "mcp:tools")
	call := func(args string) {
		r := mcpPost(t, resource, token, "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":`+args+`}}`)
		r.Body.Close()
	}
	call(`{"text":"hunter2"}`)
	call(`{"text":"far too long a text"}`)
	r := mcpPost(t, resource, "not-a-token", "", `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	r.Body.Close()

	events, raw := readAuditEvents(t, file, func(es []auditEvent) bool { return len(es) >= 4 })
	byType := map[string][]auditEvent{}
	ids := map[string]bool{}
	for _, e := range events {
		byType[e.Type] = append(byType[e.Type], e)
		if e.Schema != "portcullis.audit/v1" || e.ID == "" || ids[e.ID] || e.Time == "" || e.Outcome == "" {
			t.Errorf("an event without the schema's fields, or a repeated id: %+v", e)
		}
		ids[e.ID] = true
	}
	if len(byType["config.loaded"]) != 1 || len(byType["tool.call"]) != 1 || len(byType["tool.refused"]) != 1 || len(byType["auth.refused"]) != 1 {
		t.Fatalf("events by type: want one config.loaded, tool.call, tool.refused and auth.refused:\n%s", raw)
	}
	callEv, refused, authEv := byType["tool.call"][0], byType["tool.refused"][0], byType["auth.refused"][0]
	if callEv.Outcome != "success" || callEv.Tool != "echo" || callEv.Actor.ClientID != "audit-test" || callEv.Actor.Subject == "" || callEv.DurationUS == nil ||
		string(callEv.Arguments) != `{"text":"[REDACTED]"}` {
		t.Errorf("tool.call: %+v (arguments %s)", callEv, callEv.Arguments)
	}
	if refused.Outcome != "refused" || refused.Reason != "policy_rule" || refused.Rule != "short" || refused.Tool != "echo" {
		t.Errorf("tool.refused: %+v", refused)
	}
	if authEv.Outcome != "refused" || authEv.Reason == "" {
		t.Errorf("auth.refused: %+v", authEv)
	}
	for _, secret := range []string{token, "hunter2", "not-a-token"} {
		if strings.Contains(raw, secret) {
			t.Errorf("the audit trail holds %q:\n%s", secret, raw)
		}
	}
	for range events {
		select {
		case msg := <-syslog:
			body := msg[strings.Index(msg, "\xef\xbb\xbf")+3:]
			if !strings.Contains(raw, body+"\n") {
				t.Errorf("syslog got an event the file has not:\n%s", msg)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("syslog got fewer events than the file")
		}
	}
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`portcullis_audit_events_dropped_total{sink="syslog"} 0`, `portcullis_audit_sink_up{sink="file"} 1`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// BenchmarkAuditToolCall measures issue 42's goal for audit: what
// recording a tool.call event adds to a call, the sink's work included
// (cpu-ns/op is the process's CPU per call, the recorder's goroutine and
// the garbage collector with it). audit=off is the tool-call middleware
// of a configuration without sinks, around a handler that returns a
// result at once; audit=on records each call's event, with the caller's
// actor, to a JSON-lines sink writing to io.Discard.
func BenchmarkAuditToolCall(b *testing.B) {
	principal := &auth.Principal{Issuer: "https://idp.example", Subject: "alice", ClientID: "cli", Scopes: []string{"mcp:tools"}}
	// As auth.Middleware makes it; the key is the auth package's.
	info := &sdkauth.TokenInfo{UserID: principal.UserID(), Extra: map[string]any{"portcullis.principal": principal}}
	req := &sdk.CallToolRequest{
		Params: &sdk.CallToolParamsRaw{Name: "calculator", Arguments: json.RawMessage(`{"operation":"add","a":1,"b":2}`)},
		Extra:  &sdk.RequestExtra{TokenInfo: info},
	}
	result := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "3"}}}
	handler := func(context.Context, string, sdk.Request) (sdk.Result, error) { return result, nil }
	known := func(string) bool { return true }
	same := func(n string) string { return n }
	facts := func(string) (string, *sdk.ToolAnnotations, bool) { return "", nil, true }
	for _, tt := range []struct {
		name string
		au   *auditor
	}{
		{name: "audit=off"},
		{name: "audit=on", au: &auditor{rec: audit.NewRecorder(audit.RecorderOptions{}, audit.NewLines("stderr", io.Discard))}},
	} {
		h := tt.au.toolCalls("", known, same, facts, nil)(handler)
		if tt.au != nil {
			e := &audit.Event{}
			e.Actor = actor(info)
			if e.Actor.Subject != "alice" {
				b.Fatal("the principal is not found in the token info: has auth's key changed?")
			}
		}
		b.Run(tt.name, func(b *testing.B) {
			ctx := b.Context()
			b.ReportAllocs()
			cpu := processCPU(b)
			for b.Loop() {
				if _, err := h(ctx, "tools/call", req); err != nil {
					b.Fatal(err)
				}
			}
			if tt.au != nil {
				// The sink's work is part of the cost: wait for it.
				_ = tt.au.rec.Close(context.Background())
			}
			b.ReportMetric(float64((processCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// TestAuditToolCalledAs: an MCP App's call by its upstream's own name is
// recorded under the listed name with the name used beside it, whether
// the call goes through or the tool gate refuses it; a call by the listed
// name records no other name.
func TestAuditToolCalledAs(t *testing.T) {
	var out syncbuf.Buffer
	au := &auditor{
		rec: audit.NewRecorder(audit.RecorderOptions{}, audit.NewLines("file", &out)),
		calledAs: func(ctx context.Context) string {
			s, _ := ctx.Value(calledAsTestKey{}).(string)
			return s
		},
	}
	known := func(n string) bool { return n == "basic_get-time" }
	same := func(n string) string { return n }
	facts := func(string) (string, *sdk.ToolAnnotations, bool) { return "basic", nil, true }
	handler := func(context.Context, string, sdk.Request) (sdk.Result, error) { return &sdk.CallToolResult{}, nil }
	h := au.toolCalls("", known, same, facts, nil)(handler)
	req := &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: "basic_get-time"}, Extra: &sdk.RequestExtra{}}
	byApp := context.WithValue(t.Context(), calledAsTestKey{}, "get-time")
	if _, err := h(byApp, "tools/call", req); err != nil {
		t.Fatal(err)
	}
	if _, err := h(t.Context(), "tools/call", req); err != nil {
		t.Fatal(err)
	}
	deny := toolDeniedHook(slog.New(slog.DiscardHandler), observability.NewMetrics(prometheus.NewRegistry(), observability.BuildInfo{}), "", known, nil, au)
	deny(t.Context(), mcp.Denial{Tool: "basic_get-time", CalledAs: "get-time", Reason: mcp.DenialRule, Rule: "office-hours"})
	if err := au.rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var e auditEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, line)
		}
		got = append(got, e.Type+" "+e.Tool+" "+e.ToolCalledAs)
	}
	want := []string{"tool.call basic_get-time get-time", "tool.call basic_get-time ", "tool.refused basic_get-time get-time"}
	if !slices.Equal(got, want) {
		t.Fatalf("events (type, tool, tool_called_as) = %q, want %q", got, want)
	}
}

type calledAsTestKey struct{}
