package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	ossignal "os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// helperEnv makes the test binary an upstream stdio server (see TestMain).
const helperEnv = "PORTCULLIS_UPSTREAM_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "serve":
		helperServe()
	case "stubborn":
		// Ignores stdin closing and SIGTERM: only SIGKILL ends it.
		ossignal.Ignore(syscall.SIGTERM)
		fmt.Fprintln(os.Stderr, "stubborn: up")
		select {}
	}
	os.Exit(0)
}

// helperServe serves MCP on stdin/stdout with tools that misbehave.
func helperServe() {
	fmt.Fprintln(os.Stderr, "helper: starting")
	s := sdk.NewServer(&sdk.Implementation{Name: "helper"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo"}, func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo:" + in.Text}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "whoami"}, func(_ context.Context, req *sdk.CallToolRequest, _ echoIn) (*sdk.CallToolResult, any, error) {
		var env []string
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "MCP_PRINCIPAL_") || strings.Contains(strings.ToLower(kv), "token") {
				env = append(env, kv)
			}
		}
		slices.Sort(env)
		meta, _ := json.Marshal(req.Params.Meta[MetaKeyPrincipal])
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("%v %s", env, meta)}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "crash"}, func(context.Context, *sdk.CallToolRequest, echoIn) (*sdk.CallToolResult, any, error) {
		fmt.Fprintln(os.Stderr, "helper: crashing")
		os.Exit(3)
		return nil, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "garbage"}, func(context.Context, *sdk.CallToolRequest, echoIn) (*sdk.CallToolResult, any, error) {
		os.Stdout.WriteString("this is not JSON-RPC\n")
		select {}
	})
	_ = s.Run(context.Background(), &sdk.StdioTransport{})
}

// syncBuffer is a log sink safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func stdioOptions(t *testing.T, mode string) Options {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := fmt.Sprintf("%s=%s\n", helperEnv, mode)
	envFile := t.TempDir() + "/helper.env"
	if err := os.WriteFile(envFile, []byte("# the helper's mode\n"+env), 0o600); err != nil {
		t.Fatal(err)
	}
	return Options{Name: "helper", Transport: TransportStdio, Command: exe, EnvFiles: []string{envFile}, Required: true, StopGrace: 200 * time.Millisecond}
}

// processGone reports whether pid no longer exists (or is a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] == "Z"
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestStdioMisbehaving(t *testing.T) {
	// No garbage collection: the finalizer of an *os.File closes its
	// descriptor, which would hide a leak.
	gcPercent := debug.SetGCPercent(-1)
	t.Cleanup(func() { debug.SetGCPercent(gcPercent) }) // runs after the checks below
	fdsBefore := openFDs(t)
	goroutinesBefore := runtime.NumGoroutine()
	f := newFront(t)
	logs := &syncBuffer{}
	rec := &recorder{}
	m, err := New([]Options{stdioOptions(t, "serve")}, f.cat, Deps{
		Logger:  slog.New(slog.NewJSONHandler(logs, nil)),
		Hooks:   rec.hooks(),
		Backoff: fastBackoff,
	})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	// After three processes (the first, and one after each failure) every
	// pipe, process and goroutine is released.
	t.Cleanup(func() {
		within(t, "Manager.Close", func() { m.Close() })
		f.session.Close()
		waitFor(t, "file descriptors to be closed", func() bool { return openFDs(t) <= fdsBefore })
		waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= goroutinesBefore })
	})
	waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
	if got := text(f.call(t, "helper_echo", "a")); got != "echo:a" {
		t.Fatalf("helper_echo = %q", got)
	}
	if !strings.Contains(logs.String(), `"upstream":"helper","line":"helper: starting"`) {
		t.Errorf("the helper's stderr is not logged line by line under its name:\n%s", logs.String())
	}

	for _, tool := range []string{"helper_crash", "helper_garbage"} {
		t.Run(tool, func(t *testing.T) {
			res := f.call(t, tool, "")
			if !res.IsError || !strings.Contains(text(res), `upstream: the connection to the MCP server "helper" broke`) {
				t.Errorf("%s = %q (IsError %v), want the broken-connection error", tool, text(res), res.IsError)
			}
			if got := rec.lastCall(); !strings.HasSuffix(got, " transport") {
				t.Errorf("hook saw %q, want kind transport", got)
			}
			// The process is replaced and serves again.
			ctx := callCtx(t)
			waitFor(t, "the restart", func() bool {
				res, err := f.session.CallTool(ctx, &sdk.CallToolParams{Name: "helper_echo", Arguments: map[string]any{"text": "b"}})
				return err == nil && !res.IsError && text(res) == "echo:b"
			})
		})
	}
}

func TestStdioStopKillsStubbornServer(t *testing.T) {
	f := newFront(t)
	logs := &syncBuffer{}
	m, err := New([]Options{stdioOptions(t, "stubborn")}, f.cat, Deps{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	// The stubborn helper never answers initialize; wait until it runs.
	waitFor(t, "the helper to start", func() bool { return strings.Contains(logs.String(), "stubborn: up") })
	pid := findChild(t, os.Getpid())
	start := time.Now()
	within(t, "Manager.Close", func() { m.Close() })
	// stdin closed, SIGTERM ignored, SIGKILL after two grace periods.
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Close took %s", d)
	}
	if !processGone(pid) {
		t.Errorf("the stubborn helper %d still runs after Close", pid)
	}
	if m.Ready(context.Background()) == nil {
		t.Error("Ready = nil for a server that never answered")
	}
}

// findChild returns the PID of this process's child that runs the helper.
func findChild(t *testing.T, pid int) int {
	t.Helper()
	var found int
	waitFor(t, "the helper process", func() bool {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, task := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
			for _, c := range strings.Fields(string(b)) {
				env, _ := os.ReadFile("/proc/" + c + "/environ")
				if bytes.Contains(env, []byte(helperEnv+"=stubborn")) {
					fmt.Sscan(c, &found)
					return true
				}
			}
		}
		return false
	})
	return found
}
