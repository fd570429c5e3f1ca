package mcp

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/tools"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(l.b.String()) {
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
			var buf lockedBuffer
			logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))
			cat, err := tools.New(tools.Options{Toolsets: []string{"core"}}, tools.Deps{})
			if err != nil {
				t.Fatal(err)
			}
			sealer, err := NewSealer([][]byte{NewRandomKey()}, time.Minute, nil)
			if err != nil {
				t.Fatal(err)
			}
			var opts Options
			opts.Defaults()
			ts := httptest.NewServer(NewHandler(NewServer(cat, ServerConfig{Version: "test", Sealer: sealer, Logger: logger}), opts, Access{}, logger))
			defer ts.Close()
			if r := post(t, ts.URL, call, map[string]string{"Mcp-Protocol-Version": "2025-06-18"}); r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			ts.Close()
			sdkLines := 0
			for _, l := range buf.lines(t) {
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
