//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/redistest"
)

// TestRedisSentinelAcknowledgedWritesSurvive: two replicas of the real
// binary on Redis Sentinel (redis.wait left at its default: one replica
// acknowledges each write a client is told of), with legacy sessions
// (mcp.session_store redis) and tasks created under load, alternately on
// each replica, through a graceful SENTINEL FAILOVER (what Redis charts
// run when the primary's pod stops: the old primary takes writes for a
// while after the replica is promoted, and loses them when it becomes a
// replica) and then a SIGKILL of the primary. Every session and task
// whose creation was answered is served afterwards by both replicas;
// creations that fail meanwhile fail as "try again", never as a success
// that is then lost. Then, with every sentinel stopped, the two replicas
// keep serving through the connections they have, and a replica started
// meanwhile fails a call that needs Redis within a second, and logs that
// the sentinels are unreachable.
func TestRedisSentinelAcknowledgedWritesSurvive(t *testing.T) {
	idp := startIdP(t)
	d := redistest.StartSentinel(t)
	const resource = "https://portcullis.example.test/mcp"
	cfg := taskReplicaConfigWith(t, idp, resource, map[string]any{
		"sentinel":     map[string]any{"master_name": redistest.SentinelMaster, "addresses": d.Addrs()},
		"dial_timeout": "500ms", "read_timeout": "500ms", "write_timeout": "500ms",
	}, map[string]any{
		"mcp": map[string]any{"session_store": "redis"},
		// The load stays far under these: a rate limit is not what is tried.
		"limits": map[string]any{"rate_per_principal": 10000, "burst_per_principal": 10000},
	})
	replicas := []*server{startServer(t, nil, "--config", cfg), startServer(t, nil, "--config", cfg)}
	token := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, resource, "mcp:tools")
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	var (
		mu              sync.Mutex
		sessions, tasks []string // acknowledged
		failed          []string // creations answered with an error
	)
	count := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(sessions), len(tasks)
	}
	loadCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			pace := time.NewTicker(100 * time.Millisecond)
			defer pace.Stop()
			for i := 0; loadCtx.Err() == nil; i++ {
				s := replicas[(w+i)%2]
				id, err := haInitialize(loadCtx, s.MCPURL(), token)
				if loadCtx.Err() != nil {
					return
				}
				mu.Lock()
				if err != nil {
					failed = append(failed, "a session: "+err.Error())
				} else {
					sessions = append(sessions, id)
				}
				mu.Unlock()
				res, err := haCall(loadCtx, s.MCPURL(), token, "tools/call", "slow_compute", `"name":"slow_compute","arguments":{"seconds":0.1,"label":"durable"}`)
				if loadCtx.Err() != nil {
					return
				}
				var handle taskWire
				if err == nil {
					err = json.Unmarshal(res, &handle)
				}
				mu.Lock()
				switch {
				case err != nil:
					failed = append(failed, "a task: "+err.Error())
				case handle.TaskID != "":
					tasks = append(tasks, handle.TaskID)
				} // else answered at once, without a task: no task to keep
				mu.Unlock()
				select {
				case <-pace.C:
				case <-loadCtx.Done():
					return
				}
			}
		})
	}
	// awaitMore waits until n more sessions and tasks were acknowledged.
	awaitMore := func(what string, n int) {
		t.Helper()
		s0, t0 := count()
		pollUntil(t, 60*time.Second, func() string {
			if s, tk := count(); s < s0+n || tk < t0+n {
				return fmt.Sprintf("%s: %d sessions and %d tasks acknowledged, waiting for %d more of each", what, s-s0, tk-t0, n)
			}
			return ""
		})
	}
	awaitMore("before the failovers", 10)
	t.Logf("graceful failover (SENTINEL FAILOVER): the replica promoted after %v", d.Failover().Round(time.Millisecond))
	awaitMore("after the graceful failover", 10)
	t.Logf("SIGKILL of the primary: the replica promoted after %v", d.KillPrimary().Round(time.Millisecond))
	awaitMore("after the SIGKILL", 10)
	stop()
	wg.Wait()

	mu.Lock()
	t.Logf("%d sessions and %d tasks acknowledged, %d creations failed (try again)", len(sessions), len(tasks), len(failed))
	for _, f := range failed {
		if !strings.Contains(f, "status 503") && !strings.Contains(f, "error -32") {
			t.Errorf("a creation failed other than as a try-again: %s", f)
		}
	}
	for _, name := range []string{"A", "B"} {
		s := replicas[map[string]int{"A": 0, "B": 1}[name]]
		var lostSessions, lostTasks []string
		for _, id := range sessions {
			if err := haSessionPing(ctx, s.MCPURL(), token, id); err != nil {
				lostSessions = append(lostSessions, id+": "+err.Error())
			}
		}
		for _, id := range tasks {
			if _, err := haCall(ctx, s.MCPURL(), token, "tasks/get", id, `"taskId":"`+id+`"`); err != nil {
				lostTasks = append(lostTasks, id+": "+err.Error())
			}
		}
		if len(lostSessions) > 0 {
			t.Errorf("replica %s: %d of %d acknowledged sessions not served, such as %q", name, len(lostSessions), len(sessions), lostSessions[:min(3, len(lostSessions))])
		}
		if len(lostTasks) > 0 {
			t.Errorf("replica %s: %d of %d acknowledged tasks not found, such as %q", name, len(lostTasks), len(tasks), lostTasks[:min(3, len(lostTasks))])
		}
	}
	held := tasks[0]
	mu.Unlock()

	// Every sentinel stopped: the replicas keep serving through the
	// connections they hold to the primary, which still runs.
	d.StopSentinels()
	for i, s := range replicas {
		if _, err := haCall(ctx, s.MCPURL(), token, "tasks/get", held, `"taskId":"`+held+`"`); err != nil {
			t.Errorf("replica %d with the sentinels stopped: tasks/get: %v", i, err)
		}
	}
	// A replica started now cannot find the primary: a call that needs
	// Redis fails within a second, and the log names the cause.
	c := startServer(t, nil, "--config", cfg)
	for _, call := range []struct {
		name string
		do   func() error
	}{
		{name: "tasks/get", do: func() error {
			_, err := haCall(ctx, c.MCPURL(), token, "tasks/get", held, `"taskId":"`+held+`"`)
			return err
		}},
		{name: "a legacy initialize", do: func() error { _, err := haInitialize(ctx, c.MCPURL(), token); return err }},
	} {
		start := time.Now()
		err := call.do()
		took := time.Since(start)
		if err == nil {
			t.Errorf("%s on a replica that cannot reach Redis worked", call.name)
		}
		if took > time.Second {
			t.Errorf("%s on a replica that cannot reach Redis failed after %v, want within a second: %v", call.name, took.Round(time.Millisecond), err)
		}
		t.Logf("%s with every sentinel stopped: failed after %v: %v", call.name, took.Round(time.Millisecond), err)
	}
	if !strings.Contains(c.Stderr(), "sentinels unreachable") {
		t.Errorf("the log of the replica that cannot reach Redis does not say that the sentinels are unreachable:\n%s", c.Tail(20))
	}
}

// haInitialize opens a 2025-11-25 legacy session and returns its id, or
// an error for a transport failure, a status other than 200 or a
// JSON-RPC error. It is for the load's goroutines: it never fails the
// test.
func haInitialize(ctx context.Context, endpoint, token string) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	resp, b, err := doPost(rctx, http.DefaultClient, endpoint, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+asProtocol+`","capabilities":{},"clientInfo":{"name":"portcullis-e2e","version":"0.0.1"}}}`, bearer(token))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	msgs, err := parseRPCMessages(resp.Header.Get("Content-Type"), b)
	if err != nil || len(msgs) == 0 {
		return "", fmt.Errorf("no JSON-RPC answer (%v): %s", err, b)
	}
	if e := msgs[len(msgs)-1].Error; e != nil {
		return "", fmt.Errorf("error %d: %s", e.Code, e.Message)
	}
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		return "", fmt.Errorf("no Mcp-Session-Id: %s", b)
	}
	return id, nil
}

// haSessionPing calls PingME in the legacy session id, and returns an
// error unless it is answered 200 with a result.
func haSessionPing(ctx context.Context, endpoint, token, id string) error {
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	h := withHeaders(bearer(token), "MCP-Protocol-Version", asProtocol, "Mcp-Session-Id", id)
	resp, b, err := doPost(rctx, http.DefaultClient, endpoint, pingCallLegacy, h)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	msgs, err := parseRPCMessages(resp.Header.Get("Content-Type"), b)
	if err != nil || len(msgs) == 0 || msgs[len(msgs)-1].Error != nil {
		return fmt.Errorf("no result (%v): %s", err, b)
	}
	return nil
}
