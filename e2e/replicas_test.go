//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/haproxytest"
	"github.com/portcullis-mcp/portcullis/internal/redistest"
	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
)

// haproxy is a real HAProxy process in front of replicas, as a Kubernetes
// Service or an ingress is: round robin, no affinity, each replica health
// checked on /readyz.
type haproxy struct {
	URL  string // the front's base URL
	cmd  *exec.Cmd
	log  syncbuf.Buffer
	done chan struct{}
}

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
	cfg := haproxytest.Config{Front: front, Backends: backends}.String()
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
	cfg   string
	addrs []string
	procs []*server
}

func startReplicaSet(t *testing.T, cfg string, n int) *replicaSet {
	t.Helper()
	rs := &replicaSet{t: t, cfg: cfg, addrs: freeAddrs(t, n)}
	for i := range n {
		rs.procs = append(rs.procs, rs.start(i))
	}
	return rs
}

func (rs *replicaSet) start(i int) *server {
	rs.t.Helper()
	return runServer(rs.t, nil, "serve", "--listen", rs.addrs[i], "--metrics-listen", "127.0.0.1:0", "--config", rs.cfg)
}

// replace stops replica i with SIGTERM (it drains: readiness fails, the
// calls in flight finish) and starts a new process in its place, as a
// rolling update does.
func (rs *replicaSet) replace(i int) {
	rs.t.Helper()
	rs.procs[i].stop(rs.t)
	rs.procs[i] = rs.start(i)
}

// kill ends replica i with SIGKILL, as a node lost does, and starts a new
// process in its place.
func (rs *replicaSet) kill(i int) {
	rs.t.Helper()
	if err := rs.procs[i].cmd.Process.Kill(); err != nil {
		rs.t.Fatal(err)
	}
	<-rs.procs[i].Done()
	rs.procs[i] = rs.start(i)
}

// TestRollingRestartBehindLoadBalancer: three replicas sharing Redis
// behind HAProxy (round robin, no affinity), and go-sdk clients calling
// tools without pause: two holding 2025-11-25 sessions (each request of a
// session lands on another replica than the last) and one on 2026-07-28.
// Each replica in turn is sent SIGTERM and replaced: no call fails. Then
// one is killed with SIGKILL: only calls in flight on it may fail.
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
	token := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, resource, "mcp:tools")

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	type result struct {
		client string
		at     time.Time
		err    error
	}
	var (
		mu      sync.Mutex
		results []result
		calls   atomic.Int64
	)
	var wg sync.WaitGroup
	for _, c := range []struct{ name, version string }{
		{"legacy-a", "2025-11-25"}, {"legacy-b", "2025-11-25"}, {"modern", "2026-07-28"},
	} {
		tr := &sdk.StreamableClientTransport{Endpoint: lb.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{token}}}
		cs := connectSDK(t, ctx, tr, c.version)
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				text := fmt.Sprintf("%s-%d", c.name, i)
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				res, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
				cancel()
				if ctx.Err() != nil {
					return
				}
				if err == nil && (res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, text)) {
					err = fmt.Errorf("unexpected result %+v", res.Content)
				}
				calls.Add(1)
				if err != nil {
					mu.Lock()
					results = append(results, result{client: c.name, at: time.Now(), err: err})
					mu.Unlock()
				}
			}
		})
	}
	failures := func() []result {
		mu.Lock()
		defer mu.Unlock()
		return append([]result(nil), results...)
	}
	waitCalls := func(n int64) {
		t.Helper()
		target := calls.Load() + n
		pollUntil(t, 30*time.Second, func() string {
			if got := calls.Load(); got < target {
				return fmt.Sprintf("%d calls, waiting for %d", got, target)
			}
			return ""
		})
	}

	waitCalls(100)
	for i := range rs.procs {
		rs.replace(i)
		waitCalls(100) // the new replica in the rotation, calls going on
	}
	if f := failures(); len(f) > 0 {
		for _, r := range f {
			t.Errorf("%s: a call failed during the rolling restart: %v", r.client, r.err)
		}
	}
	rolled := calls.Load()

	// SIGKILL: what was in flight on that replica may fail, nothing else.
	rs.kill(1)
	waitCalls(200)
	stop()
	wg.Wait()
	f := failures()
	if len(f) > 3 {
		t.Errorf("%d calls failed after one replica was killed, want at most the 3 clients' calls in flight:", len(f))
		for _, r := range f {
			t.Logf("  %s: %v", r.client, r.err)
		}
	}
	t.Logf("%d calls through the rolling restart, %d in all; %d failed after the SIGKILL", rolled, calls.Load(), len(f))

	var rebuilt float64
	for _, p := range rs.procs {
		rebuilt += max(scrapeValue(t, p, "portcullis_mcp_sessions_rebuilt_total"), 0)
	}
	if rebuilt == 0 {
		t.Error("no replica rebuilt a legacy session: the sessions did not move between replicas")
	}
}
