//go:build e2e

package e2e

// Helpers for the observability end-to-end tests: finding the real
// Prometheus and OpenTelemetry Collector binaries that `make obs-tools`
// installs, running them as processes, and scraping the binary.

import (
	"bufio"
	"context"
	"errors"
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

// freeAddrs returns n distinct 127.0.0.1 addresses whose ports were free a
// moment ago, for tools that cannot be told to listen on port 0 and report
// it. All n are held until all are chosen, so they differ; another process
// may still take one before the tool binds it, which startOnFreePorts
// answers by trying again.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs[i] = ln.Addr().String()
	}
	return addrs
}

// startOnFreePorts calls start with n free addresses (see freeAddrs) and,
// if the tool it starts exits because one of them was taken in the
// meantime, again with new ones, up to three times.
func startOnFreePorts(t *testing.T, n int, start func(addrs []string) (*process, error)) []string {
	t.Helper()
	var err error
	for range 3 {
		addrs := freeAddrs(t, n)
		if _, err = start(addrs); err == nil {
			return addrs
		}
		if !errors.Is(err, errAddrInUse) {
			break
		}
		t.Logf("%v; trying other ports", err)
	}
	t.Fatal(err)
	return nil
}

// errAddrInUse is the error of a tool that exited because an address it
// was given was taken.
var errAddrInUse = errors.New("address already in use")

// process is a helper process (the collector, Prometheus) a test runs.
type process struct {
	name   string
	cmd    *exec.Cmd
	output *lineBuffer // stdout and stderr, line by line
	done   chan struct{}
	err    error
}

// tryStartProcess runs path with args, collecting its output, and waits
// until a line of output contains ready. On cleanup it sends SIGTERM and
// waits; if the test failed it logs the output. It returns the error of a
// tool that exited before it was ready (wrapping errAddrInUse when its
// output says an address was taken).
func tryStartProcess(t *testing.T, name, ready, path string, args ...string) (*process, error) {
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
		return p, nil
	case <-p.done:
		tail := p.output.Tail(stderrTail)
		err := fmt.Errorf("%s exited before logging %q: %v\n%s", name, ready, p.err, tail)
		if strings.Contains(tail, errAddrInUse.Error()) {
			err = fmt.Errorf("%w: %w", errAddrInUse, err)
		}
		return nil, err
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("%s did not log %q within 60s\n%s", name, ready, p.output.Tail(stderrTail))
	}
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

// TestStartOnFreePortsRetries checks the harness itself: a tool that finds
// its port taken is started again on other ports.
func TestStartOnFreePortsRetries(t *testing.T) {
	var tried [][]string
	got := startOnFreePorts(t, 2, func(addrs []string) (*process, error) {
		tried = append(tried, addrs)
		if len(tried) == 1 {
			return nil, fmt.Errorf("%w: the first ports were taken", errAddrInUse)
		}
		return nil, nil
	})
	if len(tried) != 2 || got[0] != tried[1][0] || got[1] != tried[1][1] {
		t.Fatalf("tried %v, got %v: want a second try whose addresses are returned", tried, got)
	}
	if got[0] == got[1] {
		t.Errorf("addresses %v are not distinct", got)
	}
}
