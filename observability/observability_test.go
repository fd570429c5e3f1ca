package observability

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestHealth(t *testing.T) {
	// What an unreachable IdP makes a key-set check return: its URL and
	// its own error text, neither of which /readyz may show.
	idpDown := errors.New(`auth: issuer https://idp.internal.example:8443/realms/x: no keys loaded: fetching JWKS: GET https://idp.internal.example:8443/certs?tenant=secret: 502 Bad Gateway: upstream connect error`)
	tests := []struct {
		name      string
		check     error
		draining  bool
		wantReady int
		wantBody  string
	}{
		{name: "ready", wantReady: http.StatusOK, wantBody: "ok\n"},
		{name: "check failing", check: idpDown, wantReady: http.StatusServiceUnavailable, wantBody: "not ready: issuer keys not loaded\n"},
		{name: "draining", draining: true, wantReady: http.StatusServiceUnavailable, wantBody: "not ready: draining\n"},
		{name: "draining and check failing", check: idpDown, draining: true, wantReady: http.StatusServiceUnavailable, wantBody: "not ready: draining; issuer keys not loaded\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Health
			h.AddCheck("issuer keys not loaded", func(context.Context) error { return tt.check })
			if tt.draining {
				h.SetDraining()
			}
			live := httptest.NewRecorder()
			h.ServeLive(live, httptest.NewRequest("GET", "/healthz", nil))
			if live.Code != http.StatusOK {
				t.Errorf("liveness = %d; it must not depend on checks or draining", live.Code)
			}
			ready := httptest.NewRecorder()
			h.ServeReady(ready, httptest.NewRequest("GET", "/readyz", nil))
			if ready.Code != tt.wantReady || ready.Body.String() != tt.wantBody {
				t.Errorf("readiness = %d %q, want %d %q", ready.Code, ready.Body.String(), tt.wantReady, tt.wantBody)
			}
			for _, leak := range []string{"idp.internal", "502", "upstream", "secret", "https://"} {
				if strings.Contains(ready.Body.String(), leak) {
					t.Errorf("readiness body %q shows the check's error text (%q)", ready.Body.String(), leak)
				}
			}
		})
	}
}

func TestRecoverAndAccessLog(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	h := Recover(logger, AccessLog(logger, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/boom" {
			panic("kaboom")
		}
		w.WriteHeader(http.StatusTeapot)
	})))

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/tea?access_token=secret-token", nil))
	if rec.Code != http.StatusTeapot {
		t.Fatalf("status %d", rec.Code)
	}
	if !strings.Contains(logs.String(), `"status":418`) || strings.Contains(logs.String(), "secret-token") {
		t.Errorf("access log must carry the status and never the query string:\n%s", logs.String())
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/boom", nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(logs.String(), "kaboom") {
		t.Fatalf("panic: status %d, logs:\n%s", rec.Code, logs.String())
	}
}

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	l, err := NewLogger(&buf, "warn")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hidden")
	l.Warn("shown")
	if strings.Contains(buf.String(), "hidden") || !strings.Contains(buf.String(), `"msg":"shown"`) {
		t.Errorf("level not applied or not JSON:\n%s", buf.String())
	}
	if _, err := NewLogger(&buf, "loud"); err == nil {
		t.Error("NewLogger accepted level \"loud\"")
	}
}

// TestLoggerTraceIDs checks that a line logged inside a span names the
// span's trace and span ids as OpenTelemetry spells them.
func TestLoggerTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	l, err := NewLogger(&buf, "info")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c},
		SpanID:     trace.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31},
		TraceFlags: trace.FlagsSampled,
	})
	l.InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "inside")
	l.Info("outside")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := `"trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331"`
	if len(lines) != 2 || !strings.Contains(lines[0], want) || strings.Contains(lines[1], "trace_id") {
		t.Errorf("want the ids %s on the first line only:\n%s", want, buf.String())
	}
}
