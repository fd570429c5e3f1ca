//go:build e2e

package e2e

// The audit trail end to end: the real binary, signing a user in through
// its authorization server in front of the real OpenID provider, sends
// its audit events to a real OpenTelemetry Collector (OTLP logs, forwarded
// by the collector's OTLP/HTTP exporter to an httptest server that decodes
// them) and to Debian's rsyslog (RFC 5424 over TCP, written by rsyslog to
// a file). Every event of the scripted session arrives once at each, of
// the schema, and none holds a token or a redacted argument; the events
// of the calls name the client's trace (at the collector, the log records
// too); with the collector stopped, calls go on and the otlp sink's drop
// counter rises.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
)

// otlpLogSink is an OTLP/HTTP logs endpoint that keeps the bodies of the
// records it receives, with their event names.
type otlpLogSink struct {
	mu      sync.Mutex
	records []otlpLogRecord
	errs    []string
}

type otlpLogRecord struct {
	EventName, Body, TraceID string
	Resource                 map[string]string
}

func (s *otlpLogSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req collogspb.ExportLogsServiceRequest
	err := readOTLP(r, "/v1/logs", &req)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errs = append(s.errs, err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rl := range req.GetResourceLogs() {
		res := attrMap(rl.GetResource().GetAttributes())
		for _, sl := range rl.GetScopeLogs() {
			for _, lr := range sl.GetLogRecords() {
				s.records = append(s.records, otlpLogRecord{
					EventName: lr.GetEventName(), Body: lr.GetBody().GetStringValue(),
					TraceID: fmt.Sprintf("%x", lr.GetTraceId()), Resource: res,
				})
			}
		}
	}
	writeOTLP(w, &collogspb.ExportLogsServiceResponse{})
}

func (s *otlpLogSink) snapshot() ([]otlpLogRecord, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.records), slices.Clone(s.errs)
}

// startRsyslog runs Debian's rsyslogd in the foreground with a
// configuration that takes RFC 5424 over TCP on a free port of 127.0.0.1
// and writes each message, as received, as one line of out. It returns
// the address.
func startRsyslog(t *testing.T, out string) string {
	t.Helper()
	bin, err := exec.LookPath("rsyslogd")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/rsyslogd"); serr != nil {
			t.Fatal("rsyslogd is not installed: run `make rsyslog-tools` (scripts/install-rsyslog.sh)")
		}
		bin = "/usr/sbin/rsyslogd"
	}
	dir := t.TempDir()
	for range 3 {
		addr := freeLoopbackAddr(t)
		_, port, _ := net.SplitHostPort(addr)
		conf := filepath.Join(dir, "rsyslog.conf")
		writeFile(t, conf, []byte(fmt.Sprintf(`global(workDirectory=%q)
module(load="imtcp")
input(type="imtcp" port=%q address="127.0.0.1" ruleset="audit")
template(name="msgonly" type="string" string="%%msg%%\n")
ruleset(name="audit") {
  action(type="omfile" file=%q template="msgonly")
}
`, dir, port, out)))
		cmd := exec.Command(bin, "-n", "-f", conf, "-i", filepath.Join(dir, "rsyslogd.pid"))
		var output bytes.Buffer
		cmd.Stdout, cmd.Stderr = &output, &output
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() { terminate(t, "rsyslogd", cmd, done, 20*time.Second) })
		// rsyslogd says nothing when it is ready: wait until it takes a
		// connection, or exits (its port taken: try another).
		up := poll(30*time.Second, 50*time.Millisecond, func() bool {
			select {
			case <-done:
				return true
			default:
			}
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		select {
		case <-done:
			t.Logf("rsyslogd exited at start; trying another port:\n%s", output.String())
			continue
		default:
		}
		if !up {
			t.Fatalf("rsyslogd does not take connections on %s:\n%s", addr, output.String())
		}
		return addr
	}
	t.Fatal("rsyslogd did not start")
	return ""
}

// auditEventOf is an event as the test checks it against the schema.
type auditEventOf struct {
	Schema, ID, Time, Type, Outcome string
	Actor                           map[string]any
	Tool, Rule, Reason              string
	Arguments                       json.RawMessage
	TraceID                         string `json:"trace_id"`
}

// decodeEvents decodes JSON events (one per element), failing on any that
// does not match the schema's required fields.
func decodeEvents(t *testing.T, where string, raw []string) []auditEventOf {
	t.Helper()
	var out []auditEventOf
	for _, r := range raw {
		var e auditEventOf
		if err := json.Unmarshal([]byte(r), &e); err != nil {
			t.Fatalf("%s: an event is not JSON: %v\n%s", where, err, r)
		}
		if _, err := time.Parse(time.RFC3339Nano, e.Time); err != nil || e.Schema != "portcullis.audit/v1" ||
			!regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(e.ID) || e.Type == "" ||
			!slices.Contains([]string{"success", "refused", "failure", "error"}, e.Outcome) {
			t.Errorf("%s: an event does not match the schema: %s", where, r)
		}
		out = append(out, e)
	}
	return out
}

func TestAuditEventsReachCollectorAndRsyslog(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	logs := &otlpLogSink{}
	collectorHTTP, _, collector := startCollectorFor(t, logs, "logs")
	syslogFile := filepath.Join(t.TempDir(), "syslog.jsonl")
	syslogAddr := startRsyslog(t, syslogFile)

	addr := freeLoopbackAddr(t)
	origin := "http://" + addr
	idp := startASIdP(t, "", origin)
	cfg := asConfig(t, idp, origin, asKeysFile(t), map[string]any{
		"audit": map[string]any{
			// Small, so that a minute of the collector down overflows it.
			"queue_size": 20,
			"sinks": []map[string]any{
				{"type": "otlp", "endpoint": "http://" + collectorHTTP + "/v1/logs"},
				{"type": "syslog", "address": syslogAddr},
			},
			"tools": []map[string]any{{"tool": "echo", "arguments": true, "redact": []string{"text"}}},
		},
	}, nil)
	cfg["auth"].(map[string]any)["policy"] = []map[string]any{
		{"tool": "echo", "rules": []map[string]any{{"name": "short-text", "allow": "size(args.text) <= 10"}}},
	}
	srv := startServer(t, nil, "--config", writeConfigFile(t, cfg), "--listen", addr)
	resource := srv.MCPURL()

	// The session: alice signs in (sign-in, consent, token issued), calls
	// echo (allowed, its text redacted) and with too long a text (refused
	// by the rule), refreshes, presents her first refresh token again (its
	// family revoked) and revokes her access token.
	app := newASApp(t, origin, resource, "mcp:tools")
	cb, err := newSignInBrowser(idp, "alice").Run(ctx, app.AuthURL(origin))
	if err != nil {
		t.Fatal(err)
	}
	tok := mustToken(t, "code exchange")(app.Exchange(t, origin, app.Code(t, cb)))
	const secretText = "hunter2"
	// The two calls carry a W3C trace of the client's, which their
	// events must name.
	const callTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	traced := func() http.Header {
		h := modernHeaders(tok.AccessToken, "tools/call", "echo")
		h.Set("Traceparent", "00-"+callTrace+"-00f067aa0ba902b7-01")
		return h
	}
	res := callOK(t, resource, modernToolCall(2, "echo", `{"text":"`+secretText+`"}`), traced())
	if !strings.Contains(string(res), secretText) {
		t.Fatalf("echo: %s", res)
	}
	resp, body := postMCP(t, http.DefaultClient, resource, modernToolCall(3, "echo", `{"text":"far too long a text"}`), traced())
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `the policy rule \"short-text\" refuses this call`) {
		t.Fatalf("echo with too long a text: status %d: %s", resp.StatusCode, body)
	}
	refreshed := mustToken(t, "refresh")(app.Refresh(t, origin, tok.RefreshToken))
	if status, _ := app.Refresh(t, origin, tok.RefreshToken); status == http.StatusOK {
		t.Fatal("a reused refresh token was accepted")
	}
	form := url.Values{"token": {refreshed.AccessToken}, "token_type_hint": {"access_token"}, "client_id": {asAppClient}}
	rresp, err := http.PostForm(origin+"/oauth/revoke", form)
	if err != nil {
		t.Fatal(err)
	}
	rresp.Body.Close()

	want := []string{"config.loaded", "signin", "consent", "token.issued", "tool.call", "tool.refused", "token.refreshed", "token.reused", "token.revoked"}
	hasAll := func(events []auditEventOf) bool {
		for _, w := range want {
			if !slices.ContainsFunc(events, func(e auditEventOf) bool { return e.Type == w }) {
				return false
			}
		}
		return true
	}
	var fromCollector, fromSyslog []auditEventOf
	var collectorRaw, syslogRaw []string
	if !poll(30*time.Second, 100*time.Millisecond, func() bool {
		recs, _ := logs.snapshot()
		collectorRaw = collectorRaw[:0]
		for _, r := range recs {
			collectorRaw = append(collectorRaw, r.Body)
		}
		raw, _ := os.ReadFile(syslogFile)
		syslogRaw = syslogRaw[:0]
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			if line = strings.TrimPrefix(line, "\ufeff"); line != "" {
				syslogRaw = append(syslogRaw, line)
			}
		}
		fromCollector, fromSyslog = decodeEvents(t, "collector", collectorRaw), decodeEvents(t, "rsyslog", syslogRaw)
		return hasAll(fromCollector) && hasAll(fromSyslog) && len(fromCollector) == len(fromSyslog)
	}) {
		t.Fatalf("want %q at both sinks, the same events; the collector has:\n%s\nrsyslog has:\n%s", want, strings.Join(collectorRaw, "\n"), strings.Join(syslogRaw, "\n"))
	}
	if _, errs := logs.snapshot(); len(errs) > 0 {
		t.Errorf("the collector's exports did not decode: %q", errs)
	}
	// Once each, the same at both.
	ids := map[string]int{}
	for _, e := range fromCollector {
		ids[e.ID]++
	}
	for _, e := range fromSyslog {
		ids[e.ID] += 10
	}
	for id, n := range ids {
		if n != 11 {
			t.Errorf("event %s arrived %d times at the collector and %d at rsyslog, want once at each", id, n%10, n/10)
		}
	}
	all := strings.Join(append(slices.Clone(collectorRaw), syslogRaw...), "\n")
	for name, secret := range map[string]string{"access token": tok.AccessToken, "refresh token": tok.RefreshToken, "refreshed access token": refreshed.AccessToken, "redacted argument": secretText} {
		if strings.Contains(all, secret) {
			t.Errorf("an event holds the %s", name)
		}
	}
	// The calls' events name the client's trace, in the event and, at
	// the collector, in the log record's own trace id.
	for i, e := range fromCollector {
		if e.Type != "tool.call" && e.Type != "tool.refused" {
			continue
		}
		if e.TraceID != callTrace {
			t.Errorf("%s: trace_id %q, want the call's %s", e.Type, e.TraceID, callTrace)
		}
		if recs, _ := logs.snapshot(); i < len(recs) && recs[i].TraceID != callTrace {
			t.Errorf("%s: the log record's trace id is %q, want the call's %s", e.Type, recs[i].TraceID, callTrace)
		}
	}
	for _, e := range fromSyslog {
		if (e.Type == "tool.call" || e.Type == "tool.refused") && e.TraceID != callTrace {
			t.Errorf("rsyslog %s: trace_id %q, want the call's %s", e.Type, e.TraceID, callTrace)
		}
	}
	for _, e := range fromCollector {
		switch e.Type {
		case "tool.call":
			if e.Tool != "echo" || e.Outcome != "success" || string(e.Arguments) != `{"text":"[REDACTED]"}` || e.Actor["subject"] != "alice" {
				t.Errorf("tool.call: %+v (arguments %s)", e, e.Arguments)
			}
		case "tool.refused":
			if e.Rule != "short-text" || e.Reason != "policy_rule" || e.Outcome != "refused" {
				t.Errorf("tool.refused: %+v", e)
			}
		case "token.reused":
			if e.Outcome != "refused" || e.Actor["client_id"] != asAppClient {
				t.Errorf("token.reused: %+v", e)
			}
		}
	}

	// The collector goes away: calls go on, as fast, and the otlp sink's
	// events are dropped once its queue is full, and counted.
	terminate(t, "otelcol-portcullis", collector.cmd, collector.done, 20*time.Second)
	start := time.Now()
	for range 60 {
		callOK(t, resource, modernToolCall(2, "echo", `{"text":"x"}`), modernHeaders(refreshed.AccessToken, "tools/call", "echo"))
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("60 calls with the collector down took %v", d)
	}
	metricsURL := srv.MetricsURL(t)
	dropped := func() float64 {
		for _, line := range strings.Split(scrape(t, metricsURL), "\n") {
			if rest, ok := strings.CutPrefix(line, `portcullis_audit_events_dropped_total{sink="otlp"} `); ok {
				v, _ := strconv.ParseFloat(rest, 64)
				return v
			}
		}
		return 0
	}
	if !poll(30*time.Second, 100*time.Millisecond, func() bool { return dropped() > 0 }) {
		t.Errorf("portcullis_audit_events_dropped_total{sink=\"otlp\"} stays 0 with the collector down and 60 calls over a queue of 20")
	}
	if strings.Contains(scrape(t, metricsURL), `portcullis_audit_events_dropped_total{sink="syslog"} 0`) == false {
		t.Error("the syslog sink, up all along, dropped events")
	}
}
