//go:build e2e

package e2e

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestConnectionLimitsRealBinary hits the limits net/http enforces before
// a handler runs, on the real binary's MCP listener, and checks each is
// counted under its own name while TCP probes are not: a header over
// server.max_header_bytes (431), a header trickled past
// server.read_header_timeout (on a new connection and on a kept-alive
// one's second request), and a kept-alive connection left idle past
// server.idle_timeout.
func TestConnectionLimitsRealBinary(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv := startServer(t, []string{
		"PORTCULLIS_SERVER_READ_HEADER_TIMEOUT=" + timeout.String(),
		"PORTCULLIS_SERVER_IDLE_TIMEOUT=" + timeout.String(),
		"PORTCULLIS_SERVER_MAX_HEADER_BYTES=2048",
	})
	addr := strings.TrimPrefix(srv.BaseURL, "http://")
	dial := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn, bufio.NewReader(conn)
	}
	// hangUpWithin fails unless the server closes conn within max.
	hangUpWithin := func(conn net.Conn, br *bufio.Reader, max time.Duration) {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(max))
		_, err := io.Copy(io.Discard, br)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection still open after %v", max)
		}
	}

	// TCP liveness probes: connect, leave.
	for range 3 {
		conn, _ := dial()
		conn.Close()
	}

	conn, br := dial()
	io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: portcullis\r\nX-Big: "+strings.Repeat("a", 8<<10)+"\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("oversized header: status %d, want 431", resp.StatusCode)
	}

	conn, br = dial()
	io.WriteString(conn, "POST /mcp HTTP/1.1\r\nHost: portcullis\r\n")
	time.Sleep(timeout / 3) // a slowloris client pauses mid-header; the server must not wait for it
	io.WriteString(conn, "X-Slow: a\r\n")
	hangUpWithin(conn, br, 10*time.Second)

	// keptAlive sends a request for /healthz on conn and reads its answer,
	// which must keep the connection open.
	keptAlive := func(conn net.Conn, br *bufio.Reader) {
		t.Helper()
		io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: portcullis\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("healthz: status %d, close %v; want a kept-alive 200", resp.StatusCode, resp.Close)
		}
	}

	// The second request on a kept-alive connection gets no more time for
	// its header than the first.
	conn, br = dial()
	keptAlive(conn, br)
	io.WriteString(conn, "POST /mcp HTTP/1.1\r\nHost: portcullis\r\n")
	hangUpWithin(conn, br, 10*time.Second)

	conn, br = dial()
	keptAlive(conn, br)
	hangUpWithin(conn, br, 10*time.Second)

	for limit, want := range map[string]float64{"header_size": 1, "read_header_timeout": 2} {
		if n := scrapeSum(t, srv, "portcullis_limit_rejections_total", `limit="`+limit+`"`); n != want {
			t.Errorf("portcullis_limit_rejections_total{limit=%q} = %v, want %v", limit, n, want)
		}
	}
	if n := scrapeSum(t, srv, "portcullis_http_idle_connections_closed_total"); n != 1 {
		t.Errorf("portcullis_http_idle_connections_closed_total = %v, want 1", n)
	}
}

// TestSlowBodyRealBinary sends a request's headers and then a body that
// never ends, with no token: the real binary answers 408 once
// server.read_body_timeout is up and closes the connection, and counts it
// as limit="body_read_timeout".
func TestSlowBodyRealBinary(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv := startServer(t, []string{"PORTCULLIS_SERVER_READ_BODY_TIMEOUT=" + timeout.String()})
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.BaseURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	start := time.Now()
	io.WriteString(conn, "POST /mcp HTTP/1.1\r\nHost: portcullis\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within 10s: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if took := time.Since(start); resp.StatusCode != http.StatusRequestTimeout || !resp.Close || took < timeout {
		t.Errorf("status %d, close %v after %v; want 408 and close after server.read_body_timeout %v: %s", resp.StatusCode, resp.Close, took, timeout, body)
	}
	if !strings.Contains(string(body), `"code":-32000`) {
		t.Errorf("body %s, want a JSON-RPC error", body)
	}
	if n, err := io.Copy(io.Discard, br); n != 0 || err != nil {
		t.Errorf("after the 408: read %d bytes, %v; want the connection closed", n, err)
	}
	if n := scrapeSum(t, srv, "portcullis_limit_rejections_total", `limit="body_read_timeout"`); n != 1 {
		t.Errorf(`portcullis_limit_rejections_total{limit="body_read_timeout"} = %v, want 1`, n)
	}
	if n := scrapeSum(t, srv, "portcullis_http_requests_in_flight"); n != 0 {
		t.Errorf("portcullis_http_requests_in_flight = %v after the 408, want 0", n)
	}
}
