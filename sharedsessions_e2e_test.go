//go:build e2e

package portcullis

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/portcullis-mcp/portcullis/internal/redistest"
)

// TestSharedSessionRoundTrips counts the commands a replica sends Redis
// per tools/call of a 2025-11-25 session it shares there, through the
// whole request path of serve (auth, the limits, the handler): the rate
// bucket script only. The record is not read again while the replica
// trusts its copy of the session (before, a GETEX a call), and the call's
// stream, which its client got whole, is not written to the shared log
// (before, an append a call: three commands, then two). Redis's MONITOR
// lists every command a client sends, and those scripts run with "lua" in
// place of a client.
func TestSharedSessionRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	cfg := filepath.Join(t.TempDir(), "portcullis.yaml")
	if err := os.WriteFile(cfg, []byte("redis:\n  url: redis://"+srv.Addr+"/0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, issuer, _ := startDevMetrics(t, "--config", cfg)
	token := devToken(t, issuer, "round-trips", base+"/mcp", "mcp:tools")
	tr := &sdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: tokenTransport(token)}, MaxRetries: -1, DisableStandaloneSSE: true}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(), tr, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(i int) {
		t.Helper()
		text := fmt.Sprint("call ", i)
		res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
		if err != nil || res.IsError || res.Content[0].(*sdk.TextContent).Text != text {
			t.Fatalf("call %d: %v %+v", i, err, res)
		}
	}
	call(0) // the session is made, initialized and called once before counting

	mon := monitorRedis(t, srv.Addr)
	marker := srv.Client(t)
	const calls = 20
	mon.mark(t, marker, "start")
	for i := range calls {
		call(i + 1)
	}
	sent := mon.mark(t, marker, "end")
	var total int
	var names []string
	for name, n := range sent {
		total += n
		names = append(names, fmt.Sprintf("%s %.2f", name, float64(n)/calls))
	}
	slices.Sort(names)
	t.Logf("commands sent per call: %q", names)
	if want := calls; total != want || sent["evalsha"] != want {
		t.Errorf("%d commands sent for %d calls (%q per call), want %d: the rate bucket script each", total, calls, names, want)
	}
}

// redisMonitor reads what MONITOR says a Redis server runs.
type redisMonitor struct {
	lines chan string
}

// monitorRedis starts MONITOR on the Redis server at addr, until the test
// ends.
func monitorRedis(t *testing.T, addr string) *redisMonitor {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	if ok, err := rd.ReadString('\n'); err != nil || ok != "+OK\r\n" {
		t.Fatalf("MONITOR: %q, %v", ok, err)
	}
	m := &redisMonitor{lines: make(chan string, 1024)}
	go func() {
		defer close(m.lines)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			m.lines <- strings.TrimSuffix(strings.TrimPrefix(line, "+"), "\r\n")
		}
	}()
	return m
}

// mark sends ECHO of a word unique to what through c, and returns the
// commands that clients sent before it, since the last mark, by name: not
// the commands scripts ran, nor the PING of the replica's Redis watch.
func (m *redisMonitor) mark(t *testing.T, c *redis.Client, what string) map[string]int {
	t.Helper()
	word := "portcullis-test-mark-" + what
	if err := c.Echo(t.Context(), word).Err(); err != nil {
		t.Fatal(err)
	}
	sent := map[string]int{}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-m.lines:
			if !ok {
				t.Fatal("MONITOR ended")
			}
			// 1700000000.123456 [0 127.0.0.1:50000] "evalsha" "…" …
			_, rest, _ := strings.Cut(line, " [")
			from, cmd, _ := strings.Cut(rest, "] ")
			name, _, _ := strings.Cut(cmd, " ")
			name = strings.ToLower(strings.Trim(name, `"`))
			switch {
			case strings.Contains(cmd, word):
				return sent
			case strings.HasSuffix(from, " lua"), name == "ping":
			default:
				sent[name]++
			}
		case <-timeout:
			t.Fatalf("MONITOR did not show the ECHO of %s within 30s", what)
		}
	}
}
