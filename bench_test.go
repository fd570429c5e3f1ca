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
	"syscall"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/mcp"
	"github.com/portcullis-mcp/portcullis/observability"
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

// BenchmarkVirtualServerCall measures issue 34's goal: a call on a virtual
// server costs within 5 % of the same call on /mcp in CPU per call. Both
// sub-benchmarks send one 2026-07-28 tools/call of the core calculator
// through the app's whole HTTP handler, in process (no sockets, no client:
// ns/op is the server's own work): auth with an ES256 token of the dev
// issuer, limits, metrics, the access log and the audit line, the era
// router, the tool gate, the SDK server. server=root calls calculator on
// /mcp with operation "add"; server=virtual calls it on a virtual server
// that exposes it as "add" with operation fixed (renamed, its schema
// rewritten, the argument set on every call), with the same two numbers,
// so the tool does the same work. Compare them with benchstat:
//
//	go test -run '^$' -bench VirtualServerCall -count 6 -cpu 1 . | tee bench.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /server bench.txt
//
// make bench-servers runs exactly that, after the load harness's
// portcullis and portcullis-virtual rows; docs/performance.md has the
// figures.
func BenchmarkVirtualServerCall(b *testing.B) {
	cfg := "auth:\n  scopes_supported: [mcp:tools]\n" +
		"limits:\n  max_in_flight: 100000\n  max_in_flight_per_principal: 100000\n" +
		"  rate_per_principal: 1000000000\n  burst_per_principal: 1000000000\n" +
		"servers:\n  - name: math\n    path: /mcp/math\n    tools:\n" +
		"      - source: core\n        name: calculator\n        expose_as: add\n" +
		"        fixed_arguments: {operation: add}\n"
	h, tokens := virtualServerHandler(b, cfg)
	for _, tt := range []struct {
		name, path, tool, args string
	}{
		{name: "server=root", path: mcpPath, tool: "calculator", args: `{"operation":"add","a":1,"b":2}`},
		{name: "server=virtual", path: "/mcp/math", tool: "add", args: `{"a":1,"b":2}`},
	} {
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tt.tool + `","arguments":` + tt.args + `,` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`)
		header := http.Header{
			"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Authorization": {"Bearer " + tokens[tt.path]}, "Mcp-Protocol-Version": {"2026-07-28"},
			"Mcp-Method": {"tools/call"}, "Mcp-Name": {tt.tool},
		}
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := processCPU(b)
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080"+tt.path, bytes.NewReader(body))
				req.Header = header.Clone()
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(`"result":3`)) {
					b.Fatalf("%s on %s: status %d: %s", tt.tool, tt.path, w.Code, w.Body)
				}
			}
			b.ReportMetric(float64((processCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// virtualServerHandler builds the app of the configuration cfgYAML in dev
// mode (its issuer's keys in process) and returns the MCP listener's
// handler and, by path, a token for /mcp and for each virtual server. Logs
// are discarded, at info level: the access log and audit lines are
// written all the same.
func virtualServerHandler(tb testing.TB, cfgYAML string) (http.Handler, map[string]string) {
	tb.Helper()
	cfg, err := loadConfig(writeConfig(tb, cfgYAML), nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	dev, err := setupDev(cfg, "127.0.0.1:8080")
	if err != nil {
		tb.Fatal(err)
	}
	a, err := newApp(tb.Context(), cfg, mcp.HTTP, extensions{}, process{stderr: io.Discard})
	if err != nil {
		tb.Fatal(err)
	}
	h, err := a.handler(tb.Context(), &observability.Health{}, dev, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tokens := map[string]string{}
	resources := map[string]string{mcpPath: cfg.Auth.Resource}
	for _, s := range cfg.Servers {
		resources[s.Path] = s.Resource
	}
	for path, resource := range resources {
		if tokens[path], err = dev.Mint("bench", resource, []string{"mcp:tools"}, time.Hour); err != nil {
			tb.Fatal(err)
		}
	}
	return h, tokens
}

// processCPU returns the CPU time, user and system, the process has used.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
