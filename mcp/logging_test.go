package mcp

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
)

// jsonLines decodes a JSON log, a line at a time.
func jsonLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(log) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestSDKLogsLifecycleAtDebug: the SDK's Info lines (three for every
// stateless request) are logged at Debug, so an Info log has none of them,
// while its warnings keep their level.
func TestSDKLogsLifecycleAtDebug(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		t.Run(level.String(), func(t *testing.T) {
			var buf syncbuf.Buffer
			logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))
			ts, _ := endpoint{logger: logger}.start(t)
			if r := post(t, ts.URL, call, map[string]string{"Mcp-Protocol-Version": "2025-06-18"}); r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			ts.Close()
			sdkLines := 0
			for _, l := range jsonLines(t, buf.String()) {
				if msg, _ := l["msg"].(string); strings.HasPrefix(msg, "server ") {
					sdkLines++
					if l["level"] != "DEBUG" {
						t.Errorf("SDK line %v at %v, want DEBUG", msg, l["level"])
					}
				}
			}
			if level == slog.LevelInfo && sdkLines != 0 {
				t.Errorf("an Info log has %d SDK lifecycle lines, want none", sdkLines)
			}
			if level == slog.LevelDebug && sdkLines < 3 {
				t.Errorf("a Debug log has %d SDK lifecycle lines, want the 3 of a stateless request", sdkLines)
			}
		})
	}
	// Levels: what is below Warn goes to Debug, the rest is unchanged.
	for in, want := range map[slog.Level]slog.Level{
		slog.LevelDebug: slog.LevelDebug, slog.LevelInfo: slog.LevelDebug, slog.LevelInfo + 2: slog.LevelDebug,
		slog.LevelWarn: slog.LevelWarn, slog.LevelError: slog.LevelError,
	} {
		if got := demote(in); got != want {
			t.Errorf("demote(%v) = %v, want %v", in, got, want)
		}
	}
}
