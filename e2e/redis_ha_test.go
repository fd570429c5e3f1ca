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

// TestAuthServerAndSessionsOnRedisCluster: two replicas of the real binary
// behind one origin, as the authorization server, keep its state and
// legacy sessions in a three-primary Redis Cluster (keys spread over the
// nodes' slots): a grant, a code, a consent, a registration and a legacy
// session made crossing replicas all hold (asRedisPair.checkHeld), rate
// limits are shared, and no node holds a bearer token.
func TestAuthServerAndSessionsOnRedisCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	const rate, burst = 100, 100
	p := startASRedisPair(t, map[string]any{"cluster": map[string]any{"addresses": c.Addrs()[:1]}},
		map[string]any{"rate_per_principal": rate, "burst_per_principal": burst})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	held := p.hold(t, ctx)
	p.checkHeld(t, ctx, held)
	// A task too, so that the scan below reads a task record.
	token := p.ccToken(t, idpClient, idpClientSecret)
	task := (&taskClient{t: t, endpoint: p.a.MCPURL(), token: token}).start("slow_compute", `{"seconds":0.1,"label":"cluster"}`)
	if w := (&taskClient{t: t, endpoint: p.b.MCPURL(), token: token}).await(task.TaskID, 30*time.Second); w.Status != "completed" {
		t.Errorf("a task created on A, through B: %s, want completed", w.Status)
	}
	checkSharedRate(t, p.ccToken(t, idpLimitedClient, idpLimitedClientSecret), []*server{p.a, p.b}, rate, burst)
	p.noSecretStored(t, c.Dump(t))
}

// haOp is one operation of the load in TestRedisSentinelFailoverUnderLoad.
type haOp struct {
	kind       string // "ping", "create", "get"
	start, end time.Time
	err        string // empty: it worked
	// inline: a create answered with the tool's result, run without a
	// task (what a replica does while the task store does not answer).
	inline bool
}

// TestRedisSentinelFailoverUnderLoad: two replicas of the real binary on a
// Redis Sentinel deployment (redis.sentinel), as the authorization server
// behind one origin (asRedisPair), under a steady load of tool calls
// (rate limits in Redis) and tasks (created, polled). Before the load, a
// grant, a code, a consent, a registration and a legacy session are made
// (asRedisPair.hold). The primary is killed. Calls that fail are those
// under way during the switch, none before and none once the replica is
// promoted, the client has found it and the killed server is back as its
// replica (writes wait for one replica on Sentinel); so are task tools answered at
// once without a task (what a replica does while the task store does not
// answer); the plain tool calls never fail (rate limits fall back to each
// replica's own buckets meanwhile); every task created before the kill is
// still there and completes; what hold made still holds
// (asRedisPair.checkHeld); rate limits are shared again; and the new
// primary holds no bearer token.
func TestRedisSentinelFailoverUnderLoad(t *testing.T) {
	d := redistest.StartSentinel(t)
	// Shared rate limits that the paced load stays under (about 60
	// requests a second): each request still takes its bucket in Redis.
	const rate, burst = 100, 100
	p := startASRedisPair(t, map[string]any{
		"sentinel":     map[string]any{"master_name": redistest.SentinelMaster, "addresses": d.Addrs()},
		"dial_timeout": "500ms", "read_timeout": "500ms", "write_timeout": "500ms",
	}, map[string]any{"rate_per_principal": rate, "burst_per_principal": burst})
	replicas := []*server{p.a, p.b}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	held := p.hold(t, ctx)
	token := p.ccToken(t, idpClient, idpClientSecret)

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
	count := func(what func(haOp) bool) (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, op := range ops {
			if what(op) {
				n++
			}
		}
		return n
	}
	loadCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			// Each worker runs one round of three requests every 200 ms.
			pace := time.NewTicker(200 * time.Millisecond)
			defer pace.Stop()
			for i := 0; loadCtx.Err() == nil; i++ {
				s := replicas[(w+i)%2]
				// A plain tool call: only the rate limit touches Redis.
				start := time.Now()
				_, err := haCall(loadCtx, s.MCPURL(), token, "tools/call", "PingME", `"name":"PingME","arguments":{}`)
				if loadCtx.Err() != nil {
					return
				}
				record(haOp{kind: "ping", start: start, end: time.Now(), err: errText(err)})
				// A task: created on one replica, read on the other.
				start = time.Now()
				res, err := haCall(loadCtx, s.MCPURL(), token, "tools/call", "slow_compute", `"name":"slow_compute","arguments":{"seconds":0.1,"label":"ha"}`)
				if loadCtx.Err() != nil {
					return // stopped mid-call: not an answer to judge
				}
				var handle taskWire
				var inline bool
				if err == nil {
					switch {
					case json.Unmarshal(res, &handle) != nil:
						err = fmt.Errorf("not a tools/call result: %s", res)
					case handle.TaskID == "" && handle.ResultType == "complete":
						inline = true
					case handle.TaskID == "":
						err = fmt.Errorf("no task handle: %s", res)
					}
				}
				record(haOp{kind: "create", start: start, end: time.Now(), err: errText(err), inline: inline})
				if err == nil && !inline {
					mu.Lock()
					created = append(created, handle.TaskID)
					mu.Unlock()
					start = time.Now()
					_, err = haCall(loadCtx, replicas[(w+i+1)%2].MCPURL(), token, "tasks/get", handle.TaskID, `"taskId":"`+handle.TaskID+`"`)
					if loadCtx.Err() != nil {
						return
					}
					record(haOp{kind: "get", start: start, end: time.Now(), err: errText(err)})
				}
				select {
				case <-pace.C:
				case <-loadCtx.Done():
					return
				}
			}
		})
	}

	// The load before the failover: some tasks created, every call
	// answered.
	pollUntil(t, 30*time.Second, func() string {
		if n := count(func(op haOp) bool { return op.kind == "create" && op.err == "" }); n < 8 {
			return fmt.Sprintf("%d tasks created before the failover, waiting for 8", n)
		}
		return ""
	})
	mu.Lock()
	before := append([]string(nil), created...)
	mu.Unlock()
	d.WaitReplicated(ctx, "")
	killedAt := time.Now()
	took := d.KillPrimary()
	promotedAt := killedAt.Add(took)
	// KillPrimary returns once the killed server is back as the new
	// primary's replica. Until then no write can be acknowledged by a
	// replica (redis.wait.replicas is 1 on Sentinel by default), so a task
	// cannot be kept; from then on it must be.
	relinkedAt := time.Now()
	// The client finds the new primary within its retries once the
	// sentinels name it; allow it this long after the promotion.
	const settle = 3 * time.Second
	settled := promotedAt.Add(settle)
	if relinkedAt.After(settled) {
		settled = relinkedAt
	}
	// The load through and after the switch: 40 rounds' calls begun once
	// the client has settled.
	pollUntil(t, 30*time.Second, func() string {
		if n := count(func(op haOp) bool { return op.start.After(settled) }); n < 3*40 {
			return fmt.Sprintf("%d calls begun after the switch, waiting for %d", n, 3*40)
		}
		return ""
	})
	stop()
	wg.Wait()

	// Judge each call: one that failed, or a create answered without a
	// task, must have been under way during the switch.
	mu.Lock()
	var failed, inline, inSwitch int
	for _, op := range ops {
		if op.end.After(killedAt) && op.start.Before(settled) {
			inSwitch++
		}
		what := ""
		switch {
		case op.err != "":
			failed++
			what = "failed: " + op.err
		case op.inline:
			inline++
			what = "was answered without a task"
		default:
			continue
		}
		at := op.start.Sub(killedAt).Round(time.Millisecond)
		t.Logf("a %s begun %v after the kill %s (after %v)", op.kind, at, what, op.end.Sub(op.start).Round(time.Millisecond))
		switch {
		case op.kind == "ping" && op.err != "":
			t.Errorf("a plain tool call begun %v after the kill failed: the rate limits did not fall back", at)
		case op.end.Before(killedAt):
			t.Errorf("a %s before the kill %s", op.kind, what)
		case !op.start.Before(settled):
			t.Errorf("a %s begun %v after the promotion %s", op.kind, op.start.Sub(promotedAt).Round(time.Millisecond), what)
		}
	}
	total := len(ops)
	mu.Unlock()
	t.Logf("%d calls, %d under way during the switch (the primary killed, the replica promoted %v later, a replica again %v later, %v allowed for the client to follow): %d failed, %d task-tool calls answered at once without a task",
		total, inSwitch, took.Round(time.Millisecond), relinkedAt.Sub(promotedAt).Round(time.Millisecond), settle, failed, inline)

	// Nothing created before the kill is lost: each task is there and
	// completed (read through either replica).
	tc := &taskClient{t: t, endpoint: p.a.MCPURL(), token: token}
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
	p.checkHeld(t, ctx, held)
	checkSharedRate(t, p.ccToken(t, idpLimitedClient, idpLimitedClientSecret), replicas, rate, burst)
	p.noSecretStored(t, d.Dump(t))
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
