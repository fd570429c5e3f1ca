//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/haproxytest"
	"github.com/portcullis-mcp/portcullis/internal/redistest"
	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
)

// haproxy is a real HAProxy process in front of replicas, as a Kubernetes
// Service or an ingress is: round robin, no affinity, each replica health
// checked on /readyz. Each response names the replica that served it in
// the header replicaHeader.
type haproxy struct {
	URL  string // the front's base URL
	cmd  *exec.Cmd
	log  syncbuf.Buffer
	done chan struct{}
}

// replicaHeader is the response header in which the balancer names the
// replica that served a request: r0 for the first of its backends, r1 for
// the next, and so on.
const replicaHeader = "X-Replica"

// startHAProxy runs haproxy on a free port in front of the replicas at
// backends (host:port), configured as [haproxytest.Config] says, one
// request per connection to a replica.
func startHAProxy(t *testing.T, backends []string) *haproxy {
	t.Helper()
	bin, err := haproxytest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	front := freeAddrs(t, 1)[0]
	cfg := haproxytest.Config{Front: front, Backends: backends, ReplicaHeader: replicaHeader}.String()
	file := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &haproxy{URL: "http://" + front, done: make(chan struct{})}
	h.cmd = exec.Command(bin, "-f", file, "-db")
	h.cmd.Stdout, h.cmd.Stderr = &h.log, &h.log
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("start haproxy: %v", err)
	}
	go func() { _ = h.cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		_ = h.cmd.Process.Kill()
		<-h.done
		if t.Failed() {
			t.Logf("haproxy log:\n%s", h.log.String())
		}
	})
	pollUntil(t, 10*time.Second, func() string {
		resp, err := http.Get(h.URL + "/readyz")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("/readyz through haproxy: %d", resp.StatusCode)
		}
		return ""
	})
	return h
}

// replicaSet is n portcullis processes on fixed ports of 127.0.0.1, so
// that a replacement takes its predecessor's place behind the balancer.
type replicaSet struct {
	t     *testing.T
	bin   string // the binary every replica runs
	cfg   string
	addrs []string
	procs []*server

	// retired sums the sessionCounters of the processes replaced or
	// killed, read just before each went; gaps are the times from then
	// until its successor ran, when it may have counted what no reading
	// saw.
	retired map[string]float64
	gaps    []replicaGap
}

// sessionCounters are the counters of shared sessions a replicaSet reads
// from a replica before it goes, so that [replicaSet.total] counts what
// every process counted.
var sessionCounters = []string{
	"portcullis_mcp_sessions_rebuilt_total",
	"portcullis_mcp_session_events_replayed_total",
	"portcullis_mcp_session_answers_forwarded_total",
}

// replicaGap is a time when a process of the replica named replica behind
// the balancer (r0 for the first) ran unread.
type replicaGap struct {
	replica  string
	from, to time.Time
}

func startReplicaSet(t *testing.T, cfg string, n int) *replicaSet {
	t.Helper()
	return startReplicaSetOf(t, binary, cfg, n)
}

// startReplicaSetOf is startReplicaSet with replicas of the binary bin.
func startReplicaSetOf(t *testing.T, bin, cfg string, n int) *replicaSet {
	t.Helper()
	rs := &replicaSet{t: t, bin: bin, cfg: cfg, addrs: freeAddrs(t, n), retired: map[string]float64{}}
	for i := range n {
		rs.procs = append(rs.procs, rs.start(i))
	}
	return rs
}

func (rs *replicaSet) start(i int) *server {
	rs.t.Helper()
	return runBinary(rs.t, rs.bin, nil, "serve", "--listen", rs.addrs[i], "--metrics-listen", "127.0.0.1:0", "--config", rs.cfg)
}

// replace stops replica i with SIGTERM (it drains: readiness fails, the
// calls in flight finish) and starts a new process in its place, as a
// rolling update does.
func (rs *replicaSet) replace(i int) {
	rs.t.Helper()
	done := rs.retire(i)
	rs.procs[i].stop(rs.t)
	rs.procs[i] = rs.start(i)
	done()
}

// kill ends replica i with SIGKILL, as a node lost does, and starts a new
// process in its place. It returns when the SIGKILL was sent.
func (rs *replicaSet) kill(i int) (killedAt time.Time) {
	rs.t.Helper()
	done := rs.retire(i)
	// The kill's time, not the call's: reading the counters first can
	// take a while on a loaded machine, and the replica serves meanwhile.
	killedAt = time.Now()
	if err := rs.procs[i].cmd.Process.Kill(); err != nil {
		rs.t.Fatal(err)
	}
	<-rs.procs[i].Done()
	rs.procs[i] = rs.start(i)
	done()
	return killedAt
}

// retire reads the sessionCounters of replica i, about to go; done ends
// the gap that begins then, once its successor runs.
func (rs *replicaSet) retire(i int) (done func()) {
	rs.t.Helper()
	// The gap begins as the reading does: what the replica counts while
	// it is read may be after the reading of its series.
	g := replicaGap{replica: fmt.Sprintf("r%d", i), from: time.Now()}
	for _, series := range sessionCounters {
		rs.retired[series] += max(scrapeValue(rs.t, rs.procs[i], series), 0)
	}
	return func() {
		g.to = time.Now()
		rs.gaps = append(rs.gaps, g)
	}
}

// total returns what every process of the set counted of series, one of
// sessionCounters, but in its gaps.
func (rs *replicaSet) total(series string) float64 {
	rs.t.Helper()
	if !slices.Contains(sessionCounters, series) {
		rs.t.Fatalf("replicaSet.total: %s is not read as replicas go", series)
	}
	sum := rs.retired[series]
	for _, p := range rs.procs {
		sum += max(scrapeValue(rs.t, p, series), 0)
	}
	return sum
}

// replaced reports whether the process serving as the replica named
// replica at t1 was replaced or killed, and its successor started, by t2:
// what it served at t1 and at t2 was served by different processes.
func (rs *replicaSet) replaced(replica string, t1, t2 time.Time) bool {
	return slices.ContainsFunc(rs.gaps, func(g replicaGap) bool {
		return g.replica == replica && !g.from.Before(t1) && !g.to.After(t2)
	})
}

// unread reports whether the replica named replica was in a gap some time
// between from and to.
func (rs *replicaSet) unread(replica string, from, to time.Time) bool {
	return slices.ContainsFunc(rs.gaps, func(g replicaGap) bool {
		return g.replica == replica && !g.to.Before(from) && !to.Before(g.from)
	})
}

// TestRollingRestartBehindLoadBalancer: three replicas sharing Redis
// behind HAProxy (round robin, no affinity), and real clients calling
// tools without pause: go-sdk holding two 2025-11-25 sessions (each
// request of a session lands on another replica than the last) and one on
// 2026-07-28, calling echo; the TypeScript SDK v1 and v2 each holding a
// 2025-11-25 session with its GET stream open and subscribed to the
// watched resource (e2e/tsclient/call-loop.mjs), calling echo,
// test_elicitation and test_sampling (answered by the client) and
// test_trigger_tool_change (a tool list change, every 2 s and whenever its
// standalone stream is down); and the MCP Inspector's CLI, one session per
// call, calling echo. Each replica in turn is sent SIGTERM and replaced:
// no call fails, elicitation and sampling calls included, each answered
// with the client's own answer, some posted to another replica than the
// call; every tool list change reaches its client; no TypeScript client
// reports a transport error, each still holds a GET stream, and each
// resumed its standalone stream with Last-Event-ID on another replica and
// got there a list change made while the stream was down. Then one is
// killed with SIGKILL: only the calls in flight on it may fail, a few per
// client, and the TypeScript sessions hold a GET stream again. At the end
// the resource's updates still reach each TypeScript client, every event
// its session's log holds since its stream began (list changes and
// updates, made on whichever replica) reached it exactly once (a call's
// stream cut by the SIGKILL and resumed on a replica that cannot replay it
// does not leave the client a second standalone stream), and the replicas, the stopped ones
// included, counted every answer as forwarded through the session bus and
// replayed events from the log.
func TestRollingRestartBehindLoadBalancer(t *testing.T) {
	idp := startIdP(t)
	rdb := redistest.Start(t)
	const resource = "https://portcullis.example.test/mcp"
	cfg := taskReplicaConfigWith(t, idp, resource, map[string]any{"url": "redis://" + rdb.Addr + "/0"}, map[string]any{
		"server": map[string]any{"drain_delay": "1s", "shutdown_grace": "10s"},
		"limits": map[string]any{"rate_per_principal": 100000, "burst_per_principal": 100000},
	})
	rs := startReplicaSet(t, cfg, 3)
	lb := startHAProxy(t, rs.addrs)
	endpoint := lb.URL + "/mcp"
	token := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, resource, "mcp:tools")

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	calls := newCallLog()
	var (
		clients []string
		wg      sync.WaitGroup
	)
	for _, c := range []struct{ name, version string }{
		{"go-legacy-a", "2025-11-25"}, {"go-legacy-b", "2025-11-25"}, {"go-modern", "2026-07-28"},
	} {
		tr := &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearerTransport{token}}}
		cs := connectSDK(t, ctx, tr, c.version)
		clients = append(clients, c.name)
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				text := fmt.Sprintf("%s-%d", c.name, i)
				started := time.Now()
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				res, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
				cancel()
				if ctx.Err() != nil {
					return
				}
				if err == nil && (res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, text)) {
					err = fmt.Errorf("unexpected result %+v", res.Content)
				}
				calls.add(callRecord{client: c.name, started: started, at: time.Now(), err: err})
			}
		})
	}
	ts := []*tsCallLoop{
		startTSCallLoop(t, calls, "ts-v1", "v1", endpoint, token),
		startTSCallLoop(t, calls, "ts-v2", "v2", endpoint, token),
	}
	stopInspector := startInspectorLoop(t, ctx, calls, "inspector", endpoint, token)
	clients = append(clients, "ts-v1", "ts-v2", "inspector")
	defer func() {
		for _, c := range ts {
			t.Logf("%s reported (successful calls left out):", c.name)
			c.logEvents(t)
		}
	}()
	mark := func(what string) time.Time {
		now := time.Now()
		t.Logf("%s %s", now.Format("15:04:05.000"), what)
		return now
	}
	// holdStreams checks that each TypeScript session holds its standalone
	// GET stream again: the SDKs reopen it a second or the server's retry
	// hint after it ended, twice at most.
	holdStreams := func(when string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for _, c := range ts {
			if !c.waitStream(deadline) {
				t.Errorf("%s: no GET stream open 10s after %s", c.name, when)
			}
		}
	}
	calls.waitCalls(t, 45*time.Second, 100, clients)
	rollStart := mark("rolling restart")
	for i := range rs.procs {
		mark(fmt.Sprintf("replica %d: SIGTERM", i))
		rs.replace(i)
		mark(fmt.Sprintf("replica %d: replaced", i))
		calls.waitCalls(t, 45*time.Second, 100, clients) // the new replica in the rotation, calls going on
	}
	holdStreams("the rolling restart")
	rollEnd := mark("rolling restart done")
	rolledFailures := calls.failed()
	reportCalls(t.Errorf, rolledFailures, "during the rolling restart")
	for _, c := range ts {
		errs := c.TransportErrors(rollStart, rollEnd)
		for _, ev := range errs[:min(len(errs), shownPerClient)] {
			t.Errorf("%s: transport error during the rolling restart: %v", c.name, ev)
		}
		if len(errs) > shownPerClient {
			t.Errorf("%s: %d more transport errors during the rolling restart", c.name, len(errs)-shownPerClient)
		}
	}
	rolled, _ := calls.counts()

	// SIGKILL: what was in flight on that replica may fail, nothing else.
	// In flight on it is what reached it before the balancer could know it
	// was gone: the calls begun before the kill, and those HAProxy handed
	// it within one health check (inter 200ms, fall 1) after, while the
	// dying process's listener still took connections. A call begun later
	// that fails went to a replica that was up: a failure of Portcullis.
	const balancerNotices = time.Second
	mark("replica 1: SIGKILL")
	killedAt := rs.kill(1)
	restarted := mark("replica 1: restarted")
	calls.waitCalls(t, 45*time.Second, 200, clients)
	holdStreams("the SIGKILL")
	// Every replica now runs a process begun after the clients subscribed.
	for _, c := range ts {
		c.waitUpdate(t, restarted, 20*time.Second)
		c.checkStandaloneLog(t, endpoint, token)
	}
	mark("stopping the clients")
	stop()
	wg.Wait()
	stopInspector()
	for _, c := range ts {
		c.stop(t)
		for _, ev := range c.TransportErrors(rollEnd, time.Now()) {
			t.Logf("%s: after the SIGKILL: %v", c.name, ev)
		}
	}
	killed := calls.failed()[len(rolledFailures):]
	perClient := map[string]int{}
	for _, r := range killed {
		perClient[r.client]++
	}
	for _, r := range killed {
		if r.started.After(killedAt.Add(balancerNotices)) {
			t.Errorf("%s: a call begun %v after the SIGKILL failed: only calls the killed replica took before the balancer noticed may fail", r.client, r.started.Sub(killedAt).Round(time.Millisecond))
		}
	}
	for client, n := range perClient {
		if n > 3 {
			t.Errorf("%s: %d calls failed after one replica was killed, want at most the few it sent before the balancer noticed", client, n)
		}
	}
	reportCalls(t.Logf, killed, "after the SIGKILL")
	total, per := calls.counts()
	t.Logf("%d calls through the rolling restart, %d in all (per client %v); %d failed after the SIGKILL", rolled, total, per, len(killed))

	for _, c := range ts {
		c.checkAnswers(t, rollStart, rollEnd, "during the rolling restart")
		c.checkResumed(t, rs, rollStart, rollEnd, "during the rolling restart")
	}

	if rs.total("portcullis_mcp_sessions_rebuilt_total") == 0 {
		t.Error("no replica rebuilt a legacy session: the sessions did not move between replicas")
	}
	if rs.total("portcullis_mcp_session_events_replayed_total") == 0 {
		t.Error("no replica replayed a session's events to a client resuming a stream")
	}
	// The replica each answer was posted to published it on the session
	// bus for the one whose call waited, and counted it; what a replica
	// counted while it went (after its counters were last read) is lost.
	answers, unread := 0, 0
	for _, c := range ts {
		for _, ev := range c.serverRequestCalls(time.Time{}, time.Now()) {
			if !ev.OK {
				continue
			}
			for _, r := range ev.AnswerReplicas {
				if rs.unread(r, ev.Started, ev.At) {
					unread++
				} else {
					answers++
				}
			}
		}
	}
	if fwd := rs.total("portcullis_mcp_session_answers_forwarded_total"); fwd < float64(answers) {
		t.Errorf("answers forwarded = %v, want at least the %d the TypeScript clients posted to replicas whose counters were read after (%d more went to a replica as it stopped)", fwd, answers, unread)
	} else {
		t.Logf("answers forwarded = %v, of %d the TypeScript clients posted (%d to a replica as it stopped)", fwd, answers+unread, unread)
	}
}
