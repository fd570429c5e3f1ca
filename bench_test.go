package portcullis

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// headBuffer keeps the first 64 KiB written to it (enough for the start-up
// lines) and discards the rest, so a long benchmark's logs cost no memory.
type headBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := 64<<10 - h.buf.Len(); room > 0 {
		h.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.String()
}

// BenchmarkServeEcho runs the whole server in process, with the production
// stack: auth (the dev issuer's ES256 tokens), a per-tool policy on echo,
// request limits (set above the load), metrics, spans exported over
// OTLP/HTTP to a local sink, info logs with the audit line. Each iteration
// is one 2026-07-28 tools/call echo over a keep-alive connection, checked.
// Its allocs/op are the server's and the in-process client's together.
// Use it for profiles:
//
//	go test -run '^$' -bench ServeEcho -cpuprofile cpu.out .
//	go tool pprof -top -focus 'net/http.\(\*conn\).serve' cpu.out
//
// (the focus leaves out the in-process client). make bench measures the
// real binary against the bare SDK and the other peers.
func BenchmarkServeEcho(b *testing.B) {
	call := startEchoServer(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
}

// startEchoServer starts the whole server in process as BenchmarkServeEcho
// describes and returns a function that makes one checked 2026-07-28
// tools/call echo. The server stops when tb ends.
func startEchoServer(tb testing.TB) (call func() error) {
	var spans atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		spans.Add(1)
	}))
	tb.Cleanup(sink.Close)
	// The OTLP exporter reads the process environment.
	tb.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.URL)
	tb.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	environ := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + sink.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"}
	// The per-tool policy, as in the load harness. The request limits stay
	// on (their cost is part of the stack) but sit above what one benchmark
	// caller reaches.
	cfg := "auth:\n  scopes_supported: [mcp:tools, mcp:echo]\n" +
		"  policy:\n    - tool: echo\n      scopes: [mcp:echo]\n" +
		"limits:\n  max_in_flight: 100000\n  max_in_flight_per_principal: 100000\n" +
		"  rate_per_principal: 1000000000\n  burst_per_principal: 1000000000\n"
	path := writeConfig(tb, cfg)

	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr headBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--dev", "--config", path, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"},
			environ, strings.NewReader(""), &stdout, &stderr)
	}()
	tb.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			tb.Error("the server did not stop within 30s")
		}
	})
	base := "http://" + listenAddr(tb, &stderr, exited)
	resp, err := http.PostForm(base+devIssuerPath+"/token", url.Values{
		"grant_type": {"client_credentials"}, "client_id": {"bench"}, "resource": {base + mcpPath}, "scope": {"mcp:tools mcp:echo"},
	})
	if err != nil {
		tb.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if err != nil || tok.AccessToken == "" {
		tb.Fatalf("token endpoint: status %d, %v", resp.StatusCode, err)
	}
	token := tok.AccessToken

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	tb.Cleanup(client.CloseIdleConnections)
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	id := 0
	return func() error {
		id++
		text := "t" + strconv.Itoa(id)
		body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + text + `"},` + meta + `}}`
		req, _ := http.NewRequest(http.MethodPost, base+mcpPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "echo")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"text":"`+text+`"`)) {
			return fmt.Errorf("call %d: status %d: %s", id, resp.StatusCode, out)
		}
		return nil
	}
}
