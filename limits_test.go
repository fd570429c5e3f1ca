package portcullis

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/auth"
)

// startHTTPServer serves h with newHTTPServer(s) on a loopback port and
// returns its address.
func startHTTPServer(t *testing.T, s serverOptions) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	srv := newHTTPServer(s, h, slog.New(slog.DiscardHandler))
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// closedWithin reports how long the server took to close conn (reads
// return EOF or a reset), failing the test if it is still open after max.
func closedWithin(t *testing.T, conn net.Conn, max time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	conn.SetReadDeadline(start.Add(max))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v", max)
	}
	return time.Since(start)
}

// TestSlowlorisIsCutOff trickles a request's headers, one line every 50ms,
// forever: the server must close the connection once ReadHeaderTimeout is
// up, whatever the client keeps sending.
func TestSlowlorisIsCutOff(t *testing.T) {
	const timeout = 300 * time.Millisecond
	addr := startHTTPServer(t, serverOptions{ReadHeaderTimeout: timeout, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		if _, err := io.WriteString(conn, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"); err != nil {
			return
		}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := io.WriteString(conn, "X-Slow: a\r\n"); err != nil {
					return // the server hung up: what the test wants
				}
			}
		}
	}()
	closedWithin(t, conn, 5*time.Second)
	// The server's clock starts when it accepts, a little before start;
	// the lines written every 50ms must not have extended it.
	if took := time.Since(start); took < timeout/2 || took > timeout+2*time.Second {
		t.Errorf("connection closed after %v, want about ReadHeaderTimeout %v", took, timeout)
	}
}

// TestIdleConnectionIsClosed checks that a kept-alive connection with no
// new request is closed after IdleTimeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	addr := startHTTPServer(t, serverOptions{ReadHeaderTimeout: time.Minute, IdleTimeout: idle, MaxHeaderBytes: 64 << 10})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("first request: status %d, close %v; want a kept-alive 200", resp.StatusCode, resp.Close)
	}
	start := time.Now()
	closedWithin(t, conn, 5*time.Second)
	if took := time.Since(start); took < idle/2 || took > idle+2*time.Second {
		t.Errorf("idle connection closed after %v, want about IdleTimeout %v", took, idle)
	}
}

// TestOversizedHeadersGet431 sends more header bytes than MaxHeaderBytes.
func TestOversizedHeadersGet431(t *testing.T) {
	addr := startHTTPServer(t, serverOptions{ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute, MaxHeaderBytes: 1024})
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 8<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("status %d, want 431", resp.StatusCode)
	}
}

func TestLimitKeysAreValidated(t *testing.T) {
	_, err := loadConfig("", []string{
		"PORTCULLIS_LIMITS_MAX_IN_FLIGHT=-1",
		"PORTCULLIS_LIMITS_RATE_PER_PRINCIPAL=-2",
		"PORTCULLIS_MCP_TOOL_TIMEOUT=-1s",
		"PORTCULLIS_MCP_MAX_SESSIONS=-3",
	}, nil)
	for _, want := range []string{
		"limits.max_in_flight:", "limits.rate_per_principal:", "mcp.tool_timeout:", "mcp.max_sessions:",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("loadConfig: %v\nwant a problem naming %s", err, want)
		}
	}
}

func TestPrincipalKey(t *testing.T) {
	r, _ := http.NewRequest(http.MethodPost, "/mcp", nil)
	if got := principalKey(r); got != "" {
		t.Errorf("without a principal: key %q, want none", got)
	}
	a := r.WithContext(auth.WithPrincipal(r.Context(), &auth.Principal{Issuer: "https://idp", Subject: "alice", ClientID: "app1"}))
	b := r.WithContext(auth.WithPrincipal(r.Context(), &auth.Principal{Issuer: "https://idp", Subject: "alice", ClientID: "app2"}))
	if ka, kb := principalKey(a), principalKey(b); ka == kb || !strings.Contains(ka, "alice") || !strings.Contains(ka, "app1") {
		t.Errorf("keys %q and %q: want subject and client id, distinct per client", ka, kb)
	}
}

func TestLimitKeysFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(`
mcp:
  tool_timeout: 30s
  tool_timeouts:
    - tool: weather
      timeout: 5s
  max_sessions: 100
limits:
  max_in_flight: 64
  max_in_flight_per_principal: 8
  rate_per_principal: 2.5
  burst_per_principal: 5
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := loadConfig(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.MCP.ToolTimeout != 30*time.Second || len(c.MCP.ToolTimeouts) != 1 || c.MCP.ToolTimeouts[0].Tool != "weather" ||
		c.MCP.ToolTimeouts[0].Timeout != 5*time.Second || c.MCP.MaxSessions != 100 {
		t.Errorf("mcp limits = %+v", c.MCP)
	}
	if l := c.Limits; l.MaxInFlight != 64 || l.MaxInFlightPerPrincipal != 8 || l.RatePerPrincipal != 2.5 || l.BurstPerPrincipal != 5 || l.MaxPrincipals != 10000 {
		t.Errorf("limits = %+v", l)
	}
}

// TestUnauthenticatedBodyNotAwaited sends /mcp a request that declares a
// body of 1000 bytes and never sends it: without a bearer token (or with
// one that fails) the 401 comes as soon as the headers are in, not after
// server.read_body_timeout, it says Connection: close, and the server
// closes the connection at once instead of waiting for the body. A client
// that never sends its body, or trickles it, holds nothing. So does a
// request the origin check refuses before auth.
func TestUnauthenticatedBodyNotAwaited(t *testing.T) {
	base, _, _ := startDevMetrics(t, "--config", writeConfig(t, "server:\n  read_body_timeout: 30s\n"))
	addr := strings.TrimPrefix(base, "http://")
	tests := []struct {
		name, authorization, origin string
		want                        int
	}{
		{name: "no Authorization", want: http.StatusUnauthorized},
		{name: "Basic scheme", authorization: "Basic YWxpY2U6c2VjcmV0", want: http.StatusUnauthorized},
		{name: "token that fails", authorization: "Bearer not-a-jwt", want: http.StatusUnauthorized},
		// Refused before auth, by the origin check: no wait either.
		{name: "origin refused", origin: "https://evil.example", want: http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			head := "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n"
			if tt.authorization != "" {
				head += "Authorization: " + tt.authorization + "\r\n"
			}
			if tt.origin != "" {
				head += "Origin: " + tt.origin + "\r\n"
			}
			start := time.Now()
			if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
				t.Fatal(err)
			}
			// Well under read_body_timeout: a server waiting for the body
			// answers only after 30s.
			conn.SetReadDeadline(start.Add(2 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer within 2s of the headers: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want || (tt.want == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "") {
				t.Errorf("status %d, WWW-Authenticate %q; want %d (with a challenge if 401)", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), tt.want)
			}
			if !resp.Close {
				t.Errorf("the %d does not say Connection: close (header %q)", resp.StatusCode, resp.Header.Get("Connection"))
			}
			// The server hangs up: nothing more is read, and soon.
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, err := io.Copy(io.Discard, br)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("connection still open 2s after the answer")
			}
			if n != 0 {
				t.Errorf("read %d bytes after the answer, want the connection closed", n)
			}
		})
	}
}
