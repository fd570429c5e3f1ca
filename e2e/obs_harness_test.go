package e2e

// Helpers for the observability end-to-end tests: finding the real
// Prometheus and OpenTelemetry Collector binaries that `make obs-tools`
// installs, running them as processes, and scraping the binary.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// obsBinary returns the path of an observability tool: from
// $PORTCULLIS_BIN, then <repo>/.cache/bin (where scripts/install-otelcol.sh
// builds otelcol-portcullis), then PATH (where Debian puts prometheus and
// promtool). It fails the test, saying how to install it, when it is
// missing.
func obsBinary(t *testing.T, name string) string {
	t.Helper()
	dirs := []string{os.Getenv("PORTCULLIS_BIN"), filepath.Join("..", ".cache", "bin")}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			abs, err := filepath.Abs(p)
			if err != nil {
				t.Fatal(err)
			}
			return abs
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	t.Fatalf("%s is not installed (looked in $PORTCULLIS_BIN, ../.cache/bin and PATH): run `make obs-tools` first", name)
	return ""
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment
// ago, for tools that cannot be told to listen on port 0 and report it.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// process is a helper process (the collector, Prometheus) a test runs.
type process struct {
	name   string
	cmd    *exec.Cmd
	output *lineBuffer // stdout and stderr, line by line
	done   chan struct{}
	err    error
}

// startProcess runs path with args, collecting its output, and waits until
// a line of output contains ready. On cleanup it sends SIGTERM and waits;
// if the test failed it logs the output.
func startProcess(t *testing.T, name, ready, path string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Dir = t.TempDir()
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	p := &process{name: name, cmd: cmd, output: &lineBuffer{}, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	readyc := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		seen := false
		for sc.Scan() {
			p.output.add(sc.Text())
			if !seen && strings.Contains(sc.Text(), ready) {
				seen = true
				close(readyc)
			}
		}
	}()
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		terminate(t, name, cmd, p.done, 20*time.Second)
		if t.Failed() {
			t.Logf("%s %s output (last %d lines):\n%s", name, strings.Join(args, " "), stderrTail, p.output.Tail(stderrTail))
		}
	})
	select {
	case <-readyc:
		return p
	case <-p.done:
		t.Fatalf("%s exited before logging %q: %v\n%s", name, ready, p.err, p.output.Tail(stderrTail))
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not log %q within 60s\n%s", name, ready, p.output.Tail(stderrTail))
	}
	return nil
}

// scrape fetches url (a /metrics endpoint) in the classic text format, as
// Prometheus 2 does, and returns the body.
func scrape(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: status %d: %s", url, resp.StatusCode, body)
	}
	return string(body)
}

// callTool sends tools/call for name with the JSON arguments args and the
// extra request fields (e.g. `"_meta":{...}` inside params) on url, with
// header, and returns the JSON-RPC response message with the given id.
func callTool(t *testing.T, url string, header http.Header, id int, name, args, extraParams string) rpcMessage {
	t.Helper()
	params := fmt.Sprintf(`{"name":%q,"arguments":%s%s}`, name, args, extraParams)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, params)
	resp, b := postMCP(t, http.DefaultClient, url, body, header)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("tools/call %s: status %d: %s", name, resp.StatusCode, b)
	}
	want := fmt.Sprint(id)
	for _, m := range rpcMessages(t, resp.Header.Get("Content-Type"), b) {
		if string(m.ID) == want {
			return m
		}
	}
	t.Fatalf("tools/call %s: no response with id %d: %s", name, id, b)
	return rpcMessage{}
}
