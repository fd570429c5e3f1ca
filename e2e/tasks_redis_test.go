//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/redistest"
)

// taskLease is the short lease the replica tests run with, so that a dead
// replica's tasks fail within seconds.
const taskLease = 3 * time.Second

// taskReplicas starts n `portcullis serve` processes that trust idp, serve
// the conformance toolset under one public resource URL (as replicas behind
// one load balancer) and share the Redis at redisAddr.
func taskReplicas(t *testing.T, idp *IdP, resource, redisAddr string, n int) []*server {
	t.Helper()
	cfg := taskReplicaConfig(t, idp, resource, redisAddr)
	var out []*server
	for range n {
		out = append(out, startServer(t, nil, "--config", cfg))
	}
	return out
}

func taskReplicaConfig(t *testing.T, idp *IdP, resource, redisAddr string) string {
	t.Helper()
	return taskReplicaConfigWith(t, idp, resource, map[string]any{"url": "redis://" + redisAddr + "/0"})
}

// taskReplicaConfigWith is taskReplicaConfig with any redis: section (one
// server, Sentinel or Cluster), and more top-level sections in extra.
func taskReplicaConfigWith(t *testing.T, idp *IdP, resource string, redisSection map[string]any, extra ...map[string]any) string {
	t.Helper()
	cfg := map[string]any{
		"auth": map[string]any{
			"resource":         resource,
			"issuers":          []map[string]any{{"issuer": idp.Issuer()}},
			"scopes_supported": []string{"mcp:tools"},
			"required_scopes":  []string{"mcp:tools"},
		},
		"tools": map[string]any{"toolsets": []string{"core", "conformance"}},
		"tasks": redisTasksSection(),
		"redis": redisSection,
	}
	for _, e := range extra {
		maps.Copy(cfg, e)
	}
	return writeConfigFile(t, cfg)
}

// redisTasksSection is the tasks: section of replicas sharing tasks in
// Redis: the short lease, a poll interval to match.
func redisTasksSection() map[string]any {
	return map[string]any{"store": "redis", "lease": taskLease.String(), "poll_interval": "200ms"}
}

// TestTasksAcrossReplicas runs two Portcullis processes sharing one real
// Redis: a task created through one is polled, answered and cancelled
// through the other; a replica killed mid-task has its task failed by the
// other within the lease; a result outlives the replica that produced it;
// another principal can touch none of it.
func TestTasksAcrossReplicas(t *testing.T) {
	idp := startIdP(t)
	rdb := redistest.Start(t)
	const resource = "https://portcullis.example.test/mcp"
	reps := taskReplicas(t, idp, resource, rdb.Addr, 2)
	a, b := reps[0], reps[1]
	alice := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, resource, "mcp:tools")
	bob := idp.ClientCredentialsToken(t, idpLimitedClient, idpLimitedClientSecret, resource, "mcp:tools")
	onA := &taskClient{t: t, endpoint: a.MCPURL(), token: alice}
	onB := &taskClient{t: t, endpoint: b.MCPURL(), token: alice}
	bobOnB := &taskClient{t: t, endpoint: b.MCPURL(), token: bob}

	t.Run("created on A, answered through B", func(t *testing.T) {
		onA.t, onB.t, bobOnB.t = t, t, t
		task := onA.start("confirm_delete", `{"filename":"cross-replica.txt"}`)
		w := onB.await(task.TaskID, 30*time.Second, "input_required")
		if w.Status != "input_required" || w.InputRequests["confirm"] == nil {
			t.Fatalf("through B: %s with input requests %v, want input_required asking confirm", w.Status, w.InputRequests)
		}
		// Another principal gets what a task that does not exist gets.
		_, missing := bobOnB.get("no-such-task")
		for _, m := range []struct{ method, extra string }{
			{"tasks/get", ""},
			{"tasks/update", `"inputResponses":{"confirm":{"action":"accept","content":{"confirm":true}}}`},
			{"tasks/cancel", ""},
		} {
			params := `"taskId":"` + task.TaskID + `"`
			if m.extra != "" {
				params += "," + m.extra
			}
			got := bobOnB.call(m.method, task.TaskID, params)
			if got.Error == nil || got.Error.Code != -32602 || got.Error.Message != missing.Error.Message {
				t.Errorf("bob's %s of alice's task: %s; want the not-found answer %+v", m.method, got.Body, missing.Error)
			}
		}
		if w, _ := onA.get(task.TaskID); w.Status != "input_required" {
			t.Fatalf("after bob's attempts: %s, want input_required (untouched)", w.Status)
		}
		onB.ack("tasks/update", task.TaskID, `"inputResponses":{"confirm":{"action":"accept","content":{"confirm":true}}}`)
		done := onA.await(task.TaskID, 30*time.Second)
		if done.Status != "completed" || done.resultText() != "Deleted cross-replica.txt." {
			t.Fatalf("through A: %s %q, want completed with the deletion", done.Status, done.resultText())
		}
	})

	t.Run("cancelled through B while A runs it", func(t *testing.T) {
		onA.t, onB.t = t, t
		task := onA.start("slow_compute", `{"seconds":60,"label":"cancel-across"}`)
		onB.ack("tasks/cancel", task.TaskID, "")
		if w, _ := onA.get(task.TaskID); w.Status != "cancelled" {
			t.Fatalf("through A after B's cancel: %s, want cancelled", w.Status)
		}
		// A's work hears of it (Redis pub/sub, or its renewal) and stops.
		pollUntil(t, 2*taskLease, func() string {
			if v := scrapeValue(t, a, `portcullis_tasks_finished_total{status="cancelled",tool="slow_compute"}`); v < 1 {
				return fmt.Sprintf("A's cancelled slow_compute tasks: %v", v)
			}
			return ""
		})
	})

	t.Run("A killed mid-task: B fails its task within the lease", func(t *testing.T) {
		onA.t, onB.t = t, t
		task := onA.start("slow_compute", `{"seconds":120,"label":"orphan"}`)
		if err := a.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-a.Done()
		start := time.Now()
		w := onB.await(task.TaskID, 3*taskLease)
		if w.Status != "failed" || w.Error == nil || w.Error.Code != -32603 || !strings.Contains(w.Error.Message, "stopped") {
			t.Fatalf("through B after A died: %s %+v, want failed with the stopped-replica error", w.Status, w.Error)
		}
		t.Logf("failed %s after the kill (lease %s)", time.Since(start).Round(100*time.Millisecond), taskLease)
		if v := scrapeValue(t, b, `portcullis_tasks_lost_total{tool="slow_compute"}`); v < 1 {
			t.Errorf("B's lost slow_compute tasks: %v, want 1", v)
		}
	})

	t.Run("a result outlives the replica that produced it", func(t *testing.T) {
		onB.t = t
		task := onB.start("slow_compute", `{"seconds":0.5,"label":"durable"}`)
		if w := onB.await(task.TaskID, 30*time.Second); w.Status != "completed" {
			t.Fatalf("%s, want completed", w.Status)
		}
		b.stop(t)
		c := startServer(t, nil, "--config", taskReplicaConfig(t, idp, resource, rdb.Addr))
		onC := &taskClient{t: t, endpoint: c.MCPURL(), token: alice}
		w, ans := onC.get(task.TaskID)
		if ans.Error != nil || w.Status != "completed" || !strings.Contains(w.resultText(), "durable") {
			t.Fatalf("through a new replica: %s %q (%s), want the stored result", w.Status, w.resultText(), ans.Body)
		}
	})
}

// TestTasksRedisFaults: Redis down at start (the server starts; task tools
// degrade), unreachable mid-task (answers are prompt and readable errors,
// no hang), and back (everything recovers without a restart).
func TestTasksRedisFaults(t *testing.T) {
	idp := startIdP(t)
	rdb := redistest.Start(t)
	const resource = "https://portcullis.example.test/mcp"
	rdb.Stop()
	s := taskReplicas(t, idp, resource, rdb.Addr, 1)[0]
	if code, body := readyz(t, s); code != http.StatusOK {
		t.Fatalf("/readyz with Redis down: %d %s, want 200 (the store is not a readiness check)", code, body)
	}
	alice := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, resource, "mcp:tools")
	c := &taskClient{t: t, endpoint: s.MCPURL(), token: alice}

	degraded := func(t *testing.T) {
		c.t = t
		// A tool that supports tasks answers as a plain call.
		start := time.Now()
		a := c.call("tools/call", "slow_compute", `"name":"slow_compute","arguments":{"seconds":0,"label":"degraded"}`)
		if a.Error != nil || !strings.Contains(a.Body, `"resultType":"complete"`) || !strings.Contains(a.Body, "degraded") {
			t.Fatalf("slow_compute with Redis down: %s, want a plain result", a.Body)
		}
		// A tool that requires tasks, and tasks/get, answer -32603.
		for _, got := range []rpcAnswer{
			c.call("tools/call", "failing_job", `"name":"failing_job","arguments":{}`),
			c.call("tasks/get", "t1", `"taskId":"t1"`),
		} {
			if got.Error == nil || got.Error.Code != -32603 || !strings.Contains(got.Error.Message, "task store is unreachable") {
				t.Errorf("with Redis down: %s, want -32603 naming the task store", got.Body)
			}
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("three requests took %s with Redis down: too slow", d)
		}
		pollUntil(t, 2*taskLease, func() string {
			if v := scrapeValue(t, s, "portcullis_task_store_up"); v != 0 {
				return fmt.Sprintf("portcullis_task_store_up %v, want 0", v)
			}
			return ""
		})
	}
	t.Run("down at start", degraded)

	t.Run("back", func(t *testing.T) {
		c.t = t
		rdb.Restart()
		var task taskWire
		pollUntil(t, 30*time.Second, func() string {
			a := c.call("tools/call", "slow_compute", `"name":"slow_compute","arguments":{"seconds":5,"label":"recovered"}`)
			if !strings.Contains(a.Body, `"resultType":"task"`) {
				return "no task yet: " + a.Body
			}
			task = c.start("slow_compute", `{"seconds":5,"label":"recovered"}`)
			return ""
		})
		if v := scrapeValue(t, s, "portcullis_task_store_up"); v != 1 {
			t.Errorf("portcullis_task_store_up %v after Redis came back, want 1", v)
		}

		// Unreachable mid-task, its data kept (a network partition, or a
		// Redis that fails over): a stopped Redis without persistence would
		// come back empty, and with it every task.
		t.Run("down mid-task", func(t *testing.T) {
			rdb.Pause()
			degraded(t)
			rdb.Resume()
			// The task ran through the outage on a live replica: it is
			// not judged lost, and its result is stored once Redis is back.
			w := c.await(task.TaskID, 60*time.Second)
			if w.Status != "completed" || !strings.Contains(w.resultText(), "recovered") {
				t.Fatalf("after Redis came back: %s %q %+v, want completed with its result", w.Status, w.resultText(), w.Error)
			}
			if v := scrapeValue(t, s, `portcullis_tasks_lost_total{tool="slow_compute"}`); v != 0 {
				t.Errorf("tasks judged lost: %v, want 0", v)
			}
		})
	})
}
