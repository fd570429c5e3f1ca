//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tasksMeta is the _meta of a 2026-07-28 request from a client that
// declares the tasks extension.
const tasksMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"portcullis-e2e","version":"0.0.1"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// taskWire is a task as tools/call (CreateTaskResult) and tasks/get show it.
type taskWire struct {
	ResultType    string          `json:"resultType"`
	TaskID        string          `json:"taskId"`
	Status        string          `json:"status"`
	StatusMessage string          `json:"statusMessage"`
	TTLMs         int64           `json:"ttlMs"`
	InputRequests map[string]any  `json:"inputRequests"`
	Result        json.RawMessage `json:"result"`
	Error         *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// rpcAnswer is one JSON-RPC answer: its result, or its error.
type rpcAnswer struct {
	Status int
	Result json.RawMessage
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	Body string
}

// taskClient speaks the tasks extension to one endpoint as one caller.
type taskClient struct {
	t        *testing.T
	endpoint string
	token    string
	id       int
}

// call POSTs a 2026-07-28 request of method with params (a JSON object's
// members, without braces; the tasks _meta is added) and Mcp-Name name.
func (c *taskClient) call(method, name, params string) rpcAnswer {
	c.t.Helper()
	c.id++
	if params != "" {
		params += ","
	}
	body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(c.id) + `,"method":"` + method + `","params":{` + params + tasksMeta + `}}`
	resp, b := postMCP(c.t, http.DefaultClient, c.endpoint, body, modernHeaders(c.token, method, name))
	a := rpcAnswer{Status: resp.StatusCode, Body: string(b)}
	msgs := rpcMessages(c.t, resp.Header.Get("Content-Type"), b)
	for _, m := range msgs {
		var env struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		raw, _ := json.Marshal(m)
		if json.Unmarshal(raw, &env) != nil || string(env.ID) != strconv.Itoa(c.id) {
			continue
		}
		a.Result = env.Result
		if len(env.Error) > 0 {
			json.Unmarshal(env.Error, &a.Error)
		}
	}
	return a
}

// start calls tool with args and returns the task it created.
func (c *taskClient) start(tool, args string) taskWire {
	c.t.Helper()
	a := c.call("tools/call", tool, `"name":"`+tool+`","arguments":`+args)
	var w taskWire
	if a.Error != nil || json.Unmarshal(a.Result, &w) != nil || w.ResultType != "task" || w.TaskID == "" {
		c.t.Fatalf("tools/call %s: want a task handle, got status %d: %s", tool, a.Status, a.Body)
	}
	return w
}

// get returns the task, or the error answer.
func (c *taskClient) get(id string) (taskWire, rpcAnswer) {
	c.t.Helper()
	a := c.call("tasks/get", id, `"taskId":"`+id+`"`)
	var w taskWire
	if a.Error == nil {
		if err := json.Unmarshal(a.Result, &w); err != nil {
			c.t.Fatalf("tasks/get: %v: %s", err, a.Body)
		}
	}
	return w, a
}

// ack sends tasks/cancel or tasks/update and fails unless it is acked.
func (c *taskClient) ack(method, id, extra string) {
	c.t.Helper()
	params := `"taskId":"` + id + `"`
	if extra != "" {
		params += "," + extra
	}
	a := c.call(method, id, params)
	if a.Error != nil || strings.TrimSpace(string(a.Result)) != `{"resultType":"complete"}` {
		c.t.Fatalf("%s: want the empty ack, got status %d: %s", method, a.Status, a.Body)
	}
}

// await polls the task until its status is one of want (or terminal), for
// at most timeout.
func (c *taskClient) await(id string, timeout time.Duration, want ...string) taskWire {
	c.t.Helper()
	var last taskWire
	pollUntil(c.t, timeout, func() string {
		w, a := c.get(id)
		if a.Error != nil {
			return fmt.Sprintf("tasks/get: %s", a.Body)
		}
		last = w
		for _, s := range append(want, "completed", "failed", "cancelled") {
			if w.Status == s {
				return ""
			}
		}
		return "status " + w.Status
	})
	return last
}

// resultText is the first text of a task's inlined tool result.
func (w taskWire) resultText() string {
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	json.Unmarshal(w.Result, &r)
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// TestTasksUpstreamRunsAsTask marks a tool of an upstream that knows
// nothing of 2026-07-28 tasks (server-everything over stdio) as a task
// tool in config: through Portcullis its call is a task that completes
// with the upstream's result, and cancelling the task cancels the
// upstream call.
func TestTasksUpstreamRunsAsTask(t *testing.T) {
	node, everything := everythingJS(t)
	cfg := writeUpstreamConfig(t, fmt.Sprintf(`
tasks:
  tools:
    - name: every_trigger-long-running-operation
      support: optional
upstreams:
  - name: every
    transport: stdio
    command: %q
    args: [%q, stdio]
    required: true
`, node, everything))
	s := startServer(t, nil, "--dev", "--config", cfg)
	awaitReady(t, s, 90*time.Second)
	c := &taskClient{t: t, endpoint: s.MCPURL(), token: devToken(t, s, "alice")}

	task := c.start("every_trigger-long-running-operation", `{"duration":2,"steps":2}`)
	done := c.await(task.TaskID, 60*time.Second)
	if done.Status != "completed" || !strings.Contains(done.resultText(), "Long running operation completed") {
		t.Fatalf("upstream task ended %s with %q (%s), want completed with server-everything's text", done.Status, done.resultText(), done.Result)
	}

	// A long one, cancelled: the task says so at once, and the upstream
	// call is cancelled (counted as such).
	before := scrapeValue(t, s, `portcullis_upstream_request_errors_total{kind="canceled",upstream="every"}`)
	long := c.start("every_trigger-long-running-operation", `{"duration":60,"steps":60}`)
	c.ack("tasks/cancel", long.TaskID, "")
	if w, _ := c.get(long.TaskID); w.Status != "cancelled" {
		t.Fatalf("after tasks/cancel: status %s, want cancelled", w.Status)
	}
	pollUntil(t, 30*time.Second, func() string {
		if v := scrapeValue(t, s, `portcullis_upstream_request_errors_total{kind="canceled",upstream="every"}`); v <= before {
			return fmt.Sprintf("upstream canceled calls %v, want more than %v", v, before)
		}
		return ""
	})
}

// TestTasksPassThroughUpstream puts a server that runs tasks of its own
// (another Portcullis, auth off on loopback, serving the conformance
// toolset) behind Portcullis with auth on: a caller that declares the
// tasks extension gets the upstream's task handle under a remote task ID,
// answers the task's input request with tasks/update, reads its result
// with tasks/get and cancels another with tasks/cancel, all through
// Portcullis; another caller finds none of it.
func TestTasksPassThroughUpstream(t *testing.T) {
	inner := startServer(t, nil, "--config", writeUpstreamConfig(t, `
tools:
  toolsets: [conformance]
`))
	awaitReady(t, inner, 30*time.Second)
	cfg := writeUpstreamConfig(t, fmt.Sprintf(`
upstreams:
  - name: inner
    transport: http
    url: %s
    required: true
`, inner.MCPURL()))
	s := startServer(t, nil, "--dev", "--config", cfg)
	awaitReady(t, s, 60*time.Second)
	alice := &taskClient{t: t, endpoint: s.MCPURL(), token: devToken(t, s, "alice")}
	bob := &taskClient{t: t, endpoint: s.MCPURL(), token: devToken(t, s, "bob")}

	task := alice.start("inner_confirm_delete", `{"filename":"a.txt"}`)
	if !strings.HasPrefix(task.TaskID, "remote.") {
		t.Errorf("task ID %q: want Portcullis's remote task ID", task.TaskID)
	}
	asking := alice.await(task.TaskID, 30*time.Second, "input_required")
	if asking.Status != "input_required" || asking.InputRequests["confirm"] == nil {
		t.Fatalf("task %s with input requests %v, want input_required asking \"confirm\"", asking.Status, asking.InputRequests)
	}
	if _, a := bob.get(task.TaskID); a.Error == nil || !strings.Contains(a.Error.Message, "Task not found") {
		t.Errorf("bob's tasks/get of alice's task: %s, want Task not found", a.Body)
	}
	alice.ack("tasks/update", task.TaskID, `"inputResponses":{"confirm":{"action":"accept","content":{"confirm":true}}}`)
	done := alice.await(task.TaskID, 30*time.Second)
	if done.Status != "completed" || done.resultText() != "Deleted a.txt." || done.TaskID != task.TaskID {
		t.Fatalf("task ended %s (id %s) with %q, want completed with \"Deleted a.txt.\" under the caller's ID", done.Status, done.TaskID, done.resultText())
	}

	long := alice.start("inner_slow_compute", `{"seconds":60}`)
	alice.ack("tasks/cancel", long.TaskID, "")
	if w, _ := alice.get(long.TaskID); w.Status != "cancelled" {
		t.Errorf("after tasks/cancel: status %s, want cancelled", w.Status)
	}
}
