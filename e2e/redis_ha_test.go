//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/redistest"
)

// TestTasksOnRedisCluster: two replicas of the real binary share tasks
// through a three-primary Redis Cluster, configured as an operator would
// (redis.cluster.addresses, one node named): a task created on one is
// answered and completed through the other.
func TestTasksOnRedisCluster(t *testing.T) {
	idp := startIdP(t)
	c := redistest.StartCluster(t, 3)
	const resource = "https://portcullis.example.test/mcp"
	cfg := taskReplicaConfigWith(t, idp, resource, map[string]any{
		"cluster": map[string]any{"addresses": c.Addrs()[:1]},
	})
	a := startServer(t, nil, "--config", cfg)
	b := startServer(t, nil, "--config", cfg)
	token := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, resource, "mcp:tools")
	onA := &taskClient{t: t, endpoint: a.MCPURL(), token: token}
	onB := &taskClient{t: t, endpoint: b.MCPURL(), token: token}

	task := onA.start("confirm_delete", `{"filename":"on-the-cluster.txt"}`)
	if w := onB.await(task.TaskID, 30*time.Second, "input_required"); w.Status != "input_required" {
		t.Fatalf("through B: %s, want input_required", w.Status)
	}
	onB.ack("tasks/update", task.TaskID, `"inputResponses":{"confirm":{"action":"accept","content":{"confirm":true}}}`)
	if done := onA.await(task.TaskID, 30*time.Second); done.Status != "completed" || done.resultText() != "Deleted on-the-cluster.txt." {
		t.Fatalf("through A: %s %q, want completed", done.Status, done.resultText())
	}
}

// haOp is one operation of the load in TestRedisSentinelFailoverUnderLoad.
type haOp struct {
	kind       string // "echo", "create", "get"
	start, end time.Time
	err        string // empty: it worked
}

// TestRedisSentinelFailoverUnderLoad: two replicas of the real binary on a
// Redis Sentinel deployment (redis.sentinel), under a steady load of tool
// calls (rate limits in Redis) and tasks (created, polled). The primary is
// killed. Calls that fail are those during the switch, none before and
// none once the replica is promoted and the client has found it; the
// plain tool calls never fail (rate limits fall back to each replica's own
// buckets meanwhile); every task created before the kill is still there
// and completes.
func TestRedisSentinelFailoverUnderLoad(t *testing.T) {
	idp := startIdP(t)
	d := redistest.StartSentinel(t)
	const resource = "https://portcullis.example.test/mcp"
	cfg := taskReplicaConfigWith(t, idp, resource, map[string]any{
		"sentinel":     map[string]any{"master_name": redistest.SentinelMaster, "addresses": d.Addrs()},
		"dial_timeout": "500ms", "read_timeout": "500ms", "write_timeout": "500ms",
	}, map[string]any{
		// Shared rate limits that the load stays under: each request
		// still takes its bucket in Redis.
		"limits": map[string]any{"rate_per_principal": 100000, "burst_per_principal": 100000},
	})
	replicas := []*server{startServer(t, nil, "--config", cfg), startServer(t, nil, "--config", cfg)}
	token := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, resource, "mcp:tools")

	var (
		mu      sync.Mutex
		ops     []haOp
		created []string // task ids created
	)
	record := func(op haOp) {
		mu.Lock()
		ops = append(ops, op)
		mu.Unlock()
	}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				s := replicas[(w+i)%2]
				// A plain tool call: only the rate limit touches Redis.
				start := time.Now()
				_, err := haCall(ctx, s.MCPURL(), token, "tools/call", "echo", `"name":"echo","arguments":{"text":"hi"}`)
				if ctx.Err() != nil {
					return
				}
				record(haOp{kind: "echo", start: start, end: time.Now(), err: errText(err)})
				// A task: created on one replica, read on the other.
				start = time.Now()
				res, err := haCall(ctx, s.MCPURL(), token, "tools/call", "slow_compute", `"name":"slow_compute","arguments":{"seconds":0.1,"label":"ha"}`)
				if ctx.Err() != nil {
					return // stopped mid-call: not an answer to judge
				}
				var handle taskWire
				if err == nil {
					if json.Unmarshal(res, &handle) != nil || handle.TaskID == "" {
						err = fmt.Errorf("no task handle: %s", res)
					}
				}
				record(haOp{kind: "create", start: start, end: time.Now(), err: errText(err)})
				if err != nil {
					continue
				}
				mu.Lock()
				created = append(created, handle.TaskID)
				mu.Unlock()
				start = time.Now()
				_, err = haCall(ctx, replicas[(w+i+1)%2].MCPURL(), token, "tasks/get", handle.TaskID, `"taskId":"`+handle.TaskID+`"`)
				if ctx.Err() != nil {
					return
				}
				record(haOp{kind: "get", start: start, end: time.Now(), err: errText(err)})
			}
		})
	}

	time.Sleep(3 * time.Second) // load before the failover
	mu.Lock()
	before := append([]string(nil), created...)
	mu.Unlock()
	d.WaitReplicated(t.Context(), "")
	killedAt := time.Now()
	took := d.KillPrimary()
	promotedAt := killedAt.Add(took)
	time.Sleep(8 * time.Second) // load through and after the switch
	stop()
	wg.Wait()

	// The client finds the new primary within its retries once the
	// sentinels name it; allow it this long after the promotion.
	const settle = 3 * time.Second
	var failed, total, failedWindow int
	for _, op := range ops {
		total++
		if op.err == "" {
			continue
		}
		failed++
		switch {
		case op.kind == "echo":
			t.Errorf("a plain tool call failed at %v after the kill: %s", op.start.Sub(killedAt).Round(time.Millisecond), op.err)
		case op.end.Before(killedAt):
			t.Errorf("%s failed before the kill: %s", op.kind, op.err)
		case op.start.After(promotedAt.Add(settle)):
			t.Errorf("%s failed %v after the promotion: %s", op.kind, op.start.Sub(promotedAt).Round(time.Millisecond), op.err)
		default:
			failedWindow++
		}
	}
	t.Logf("%d operations, %d failed, all %d within the switch (killed, promoted after %v)", total, failed, failedWindow, took.Round(time.Millisecond))
	if total < 50 {
		t.Fatalf("only %d operations ran: the load did not run", total)
	}

	// Nothing created before the kill is lost: each task is there and
	// completed (read through either replica).
	tc := &taskClient{t: t, endpoint: replicas[0].MCPURL(), token: token}
	for _, id := range before {
		if w := tc.await(id, 30*time.Second); w.Status != "completed" {
			t.Errorf("task %s created before the failover: %s, want completed", id, w.Status)
		}
	}
	if len(before) == 0 {
		t.Fatal("no task was created before the failover")
	}

	// Each replica saw the switch once, and finds Redis up after it.
	for i, s := range replicas {
		const failovers, up = `portcullis_redis_failovers_total{mode="sentinel"}`, "portcullis_redis_up"
		if !poll(10*time.Second, 100*time.Millisecond, func() bool {
			return scrapeValue(t, s, failovers) == 1 && scrapeValue(t, s, up) == 1
		}) {
			t.Errorf("replica %d: %s = %v and %s = %v, want 1 and 1", i, failovers, scrapeValue(t, s, failovers), up, scrapeValue(t, s, up))
		}
	}
}

// haCall posts one 2026-07-28 request (the tasks _meta included) and
// returns its result, or an error for a transport failure, an HTTP status
// other than 200 or a JSON-RPC error. It is for the load's goroutines: it
// never fails the test.
func haCall(ctx context.Context, endpoint, token, method, name, params string) (json.RawMessage, error) {
	if params != "" {
		params += ","
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params + tasksMeta + `}}`
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	resp, b, err := doPost(rctx, http.DefaultClient, endpoint, body, modernHeaders(token, method, name))
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil // the load was stopped
		}
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	msgs, err := parseRPCMessages(resp.Header.Get("Content-Type"), b)
	if err != nil || len(msgs) == 0 {
		return nil, fmt.Errorf("no JSON-RPC answer (%v): %s", err, b)
	}
	env := msgs[len(msgs)-1] // the last message is the answer
	if env.Error != nil {
		return nil, fmt.Errorf("error %d: %s", env.Error.Code, env.Error.Message)
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(env.Result, &r) == nil && r.IsError {
		return nil, fmt.Errorf("tool error: %s", env.Result)
	}
	return env.Result, nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
