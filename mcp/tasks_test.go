package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// The tests here drive the tasks extension over /mcp with raw 2026-07-28
// requests, in a synctest bubble: the conformance fixtures' timers and the
// manager's run on the fake clock, and the handler is called directly.

const (
	// tasksMeta declares the tasks extension; plainMeta declares nothing.
	tasksMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	plainMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
)

// taskSetup says how to build a tasks endpoint; the zero value serves the
// conformance toolset with default task options and no sealing key.
type taskSetup struct {
	opts    tasks.Options
	store   tasks.Store              // nil: a new memory store
	sealTTL time.Duration            // zero: no sealer
	add     func(c *catalog.Catalog) // more tools
	remote  tasks.RemoteRouter       // nil: no remote tasks
}

// taskEndpoint serves the conformance toolset with the tasks extension
// over a memory store, behind a bearer check whose token is the caller's
// name. It returns the handler to call in the bubble, and the manager.
func taskEndpoint(t *testing.T) (http.Handler, *tasks.Manager) {
	t.Helper()
	return taskSetup{}.endpoint(t)
}

// endpoint is taskEndpoint as s says.
func (s taskSetup) endpoint(t *testing.T) (http.Handler, *tasks.Manager) {
	t.Helper()
	cat, err := toolsets.New(toolsets.Options{Toolsets: []string{"conformance"}}, toolsets.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if s.add != nil {
		s.add(cat)
	}
	store := s.store
	if store == nil {
		store = tasks.NewMemoryStore(nil)
	}
	mgr := tasks.NewManager(s.opts, tasks.Deps{Store: store})
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		mgr.Shutdown(ctx) // tasks still running end now, inside the bubble
	})
	deps := Deps{Version: "test", Tasks: mgr, RemoteTasks: s.remote}
	if s.sealTTL > 0 {
		if deps.Sealer, err = NewSealer([][]byte{NewRandomKey()}, s.sealTTL, nil); err != nil {
			t.Fatal(err)
		}
	}
	h := New(cat, Options{}, deps).Handler()
	verify := func(_ context.Context, token string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		return &sdkauth.TokenInfo{UserID: "https://issuer.test|" + token}, nil
	}
	return sdkauth.RequireBearerToken(verify, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h), mgr
}

// rpc is one JSON-RPC answer, its members raw.
type rpc struct {
	status int
	body   string
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// send posts a 2026-07-28 request with method and Mcp-Name name (none if
// empty) as caller who, and decodes the last message of the answer.
func send(t *testing.T, h http.Handler, who, method, name, body string) rpc {
	t.Helper()
	header := map[string]string{"Mcp-Protocol-Version": modernHdr, "Mcp-Method": method, "Authorization": "Bearer " + who}
	if name != "" {
		header["Mcp-Name"] = name
	}
	r := postTo(t, h, body, header)
	out := rpc{status: r.status, body: r.body}
	raw := r.body
	if strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(strings.NewReader(r.body))
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				raw = data
			}
		}
	}
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("%s: answer is not JSON-RPC (%v): %d %s", method, err, r.status, r.body)
	}
	return out
}

// callTool calls tool with args, declaring the extension or not.
func callTool(t *testing.T, h http.Handler, who, tool, args string, declare bool) rpc {
	t.Helper()
	meta := plainMeta
	if declare {
		meta = tasksMeta
	}
	return send(t, h, who, "tools/call", tool,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`,`+meta+`}}`)
}

// taskCall sends a tasks/ method about id with more params (a leading
// comma and members, or empty), declaring the extension.
func taskCall(t *testing.T, h http.Handler, who, method, id, more string) rpc {
	t.Helper()
	return send(t, h, who, method, id,
		`{"jsonrpc":"2.0","id":2,"method":"`+method+`","params":{"taskId":"`+id+`"`+more+`,`+tasksMeta+`}}`)
}

// detailedTask is tasks/get's answer.
type detailedTask struct {
	ResultType    string                     `json:"resultType"`
	TaskID        string                     `json:"taskId"`
	Status        tasks.Status               `json:"status"`
	StatusMessage string                     `json:"statusMessage"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	Result        json.RawMessage            `json:"result"`
	Error         *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func getTask(t *testing.T, h http.Handler, who, id string) detailedTask {
	t.Helper()
	r := taskCall(t, h, who, "tasks/get", id, "")
	if r.Error != nil || r.status != http.StatusOK {
		t.Fatalf("tasks/get: %d %s", r.status, r.body)
	}
	var d detailedTask
	if err := json.Unmarshal(r.Result, &d); err != nil {
		t.Fatal(err)
	}
	if d.ResultType != "complete" || d.TaskID != id {
		t.Fatalf("tasks/get answered %s", r.Result)
	}
	return d
}

// createTask calls tool as a task and returns the task's id, checking
// the CreateTaskResult: flat, resultType task, integer ttlMs and
// pollIntervalMs, and no payload.
func createTask(t *testing.T, h http.Handler, who, tool, args string) string {
	t.Helper()
	r := callTool(t, h, who, tool, args, true)
	if r.Error != nil || r.status != http.StatusOK {
		t.Fatalf("tools/call of %s: %d %s", tool, r.status, r.body)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(r.Result, &fields); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range fields {
			if k == "_meta" { // the SDK's serverInfo
				continue
			}
			if !yield(k) {
				return
			}
		}
	})
	want := []string{"createdAt", "lastUpdatedAt", "pollIntervalMs", "resultType", "status", "taskId", "ttlMs"}
	if !slices.Equal(keys, want) {
		t.Fatalf("CreateTaskResult has %q, want exactly %q: %s", keys, want, r.Result)
	}
	if string(fields["resultType"]) != `"task"` || string(fields["status"]) != `"working"` {
		t.Fatalf("CreateTaskResult %s, want resultType task, status working", r.Result)
	}
	for _, k := range []string{"ttlMs", "pollIntervalMs"} {
		var n int64
		if err := json.Unmarshal(fields[k], &n); err != nil || n <= 0 {
			t.Fatalf("%s = %s, want a positive integer", k, fields[k])
		}
	}
	for _, k := range []string{"createdAt", "lastUpdatedAt"} {
		var s string
		if err := json.Unmarshal(fields[k], &s); err != nil {
			t.Fatal(err)
		}
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			t.Fatalf("%s = %s: %v", k, s, err)
		}
	}
	var id string
	if err := json.Unmarshal(fields["taskId"], &id); err != nil || id == "" {
		t.Fatalf("taskId = %s", fields["taskId"])
	}
	return id
}

// resultText returns the text of a CallToolResult's first content.
func resultText(t *testing.T, raw json.RawMessage) (string, bool) {
	t.Helper()
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("result %s: not a tool result with content (%v)", raw, err)
	}
	return res.Content[0].Text, res.IsError
}

func TestTaskLifecycleOverHTTP(t *testing.T) {
	tests := []struct {
		name     string
		tool     string
		args     string
		runs     time.Duration
		check    func(t *testing.T, d detailedTask)
		wantDone tasks.Status
	}{
		{
			name: "completes", tool: "slow_compute", args: `{"seconds":5,"label":"x"}`, runs: 5 * time.Second,
			wantDone: tasks.StatusCompleted,
			check: func(t *testing.T, d detailedTask) {
				if text, isErr := resultText(t, d.Result); isErr || !strings.Contains(text, `Computed "x" after 5s`) {
					t.Errorf("result %s", d.Result)
				}
			},
		},
		{
			// A tool error is a completed task whose result says so.
			name: "tool error completes", tool: "failing_job", args: `{}`, runs: time.Second,
			wantDone: tasks.StatusCompleted,
			check: func(t *testing.T, d detailedTask) {
				if text, isErr := resultText(t, d.Result); !isErr || !strings.Contains(text, "the job failed") {
					t.Errorf("result %s, want a tool error", d.Result)
				}
			},
		},
		{
			name: "panic fails", tool: "protocol_error_job", args: `{}`,
			wantDone: tasks.StatusFailed,
			check: func(t *testing.T, d detailedTask) {
				if d.Error == nil || d.Error.Code != -32603 || d.Result != nil {
					t.Errorf("error %+v, result %s; want -32603 and no result", d.Error, d.Result)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				h, _ := taskEndpoint(t)
				id := createTask(t, h, "alice", tt.tool, tt.args)
				if tt.runs > 0 {
					synctest.Wait()
					if d := getTask(t, h, "alice", id); d.Status != tasks.StatusWorking || d.Result != nil || d.Error != nil {
						t.Fatalf("while running: %+v, want working without payload", d)
					}
					time.Sleep(tt.runs)
				}
				synctest.Wait()
				d := getTask(t, h, "alice", id)
				if d.Status != tt.wantDone {
					t.Fatalf("status %s, want %s: %+v", d.Status, tt.wantDone, d)
				}
				tt.check(t, d)
			})
		})
	}
}

func TestTaskCancelOverHTTP(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		h, _ := taskEndpoint(t)
		id := createTask(t, h, "alice", "slow_compute", `{"seconds":600}`)
		r := taskCall(t, h, "alice", "tasks/cancel", id, "")
		if r.Error != nil || string(r.Result) != `{"resultType":"complete"}` {
			t.Fatalf("tasks/cancel answered %d %s, want exactly {\"resultType\":\"complete\"}", r.status, r.body)
		}
		synctest.Wait()
		if d := getTask(t, h, "alice", id); d.Status != tasks.StatusCancelled || d.Result != nil || d.Error != nil {
			t.Fatalf("after tasks/cancel: %+v", d)
		}
		// Cancelling a cancelled task is acknowledged the same way.
		if r := taskCall(t, h, "alice", "tasks/cancel", id, ""); string(r.Result) != `{"resultType":"complete"}` {
			t.Fatalf("second tasks/cancel answered %s", r.body)
		}
	})
}

// TestTaskUpdateOverHTTP runs confirm_delete: its task asks for a
// confirmation, tasks/update delivers it, and the task completes.
func TestTaskUpdateOverHTTP(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		h, _ := taskEndpoint(t)
		id := createTask(t, h, "alice", "confirm_delete", `{"filename":"notes.txt"}`)
		synctest.Wait()
		d := getTask(t, h, "alice", id)
		if d.Status != tasks.StatusInputRequired || d.InputRequests["confirm"] == nil || len(d.InputRequests) != 1 {
			t.Fatalf("after the call: %+v, want input_required asking confirm", d)
		}
		var req struct {
			Method string `json:"method"`
			Params struct {
				Message string `json:"message"`
			} `json:"params"`
		}
		if err := json.Unmarshal(d.InputRequests["confirm"], &req); err != nil || req.Method != "elicitation/create" || req.Params.Message != "Delete notes.txt?" {
			t.Fatalf("input request %s (%v)", d.InputRequests["confirm"], err)
		}
		// tasks/update without inputResponses is refused.
		if r := taskCall(t, h, "alice", "tasks/update", id, ""); r.Error == nil || r.Error.Code != -32602 {
			t.Fatalf("tasks/update without inputResponses: %s", r.body)
		}
		r := taskCall(t, h, "alice", "tasks/update", id, `,"inputResponses":{"confirm":{"action":"accept","content":{"confirm":true}}}`)
		if r.Error != nil || string(r.Result) != `{"resultType":"complete"}` {
			t.Fatalf("tasks/update answered %s", r.body)
		}
		synctest.Wait()
		d = getTask(t, h, "alice", id)
		if d.Status != tasks.StatusCompleted {
			t.Fatalf("after tasks/update: %+v, want completed", d)
		}
		if text, isErr := resultText(t, d.Result); isErr || text != "Deleted notes.txt." {
			t.Fatalf("result %s", d.Result)
		}
	})
}

// TestTaskHandlerStarts calls test_tool_with_task: a multi-round-trip
// call first, which becomes a task once the handler has its input.
func TestTaskHandlerStarts(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		h, _ := taskEndpoint(t)
		r := callTool(t, h, "alice", "test_tool_with_task", `{}`, true)
		if r.Error != nil || !strings.Contains(string(r.Result), `"user_name"`) || strings.Contains(string(r.Result), `"taskId"`) {
			t.Fatalf("first call: %s, want input requests and no task", r.body)
		}
		r = send(t, h, "alice", "tools/call", "test_tool_with_task",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_tool_with_task","arguments":{},"inputResponses":{"user_name":{"action":"accept","content":{"name":"Ada"}}},`+tasksMeta+`}}`)
		var created struct {
			ResultType string `json:"resultType"`
			TaskID     string `json:"taskId"`
		}
		if r.Error != nil || json.Unmarshal(r.Result, &created) != nil || created.ResultType != "task" || created.TaskID == "" {
			t.Fatalf("second call: %s, want a task", r.body)
		}
		synctest.Wait()
		d := getTask(t, h, "alice", created.TaskID)
		if text, _ := resultText(t, d.Result); d.Status != tasks.StatusCompleted || text != "Hello, Ada, from a task!" {
			t.Fatalf("task %+v", d)
		}
	})
}

func TestTaskMethodErrors(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		h, _ := taskEndpoint(t)
		id := createTask(t, h, "alice", "slow_compute", `{"seconds":600}`)

		unknown := taskCall(t, h, "alice", "tasks/get", "no-such-task", "")
		if unknown.status != http.StatusOK || unknown.Error == nil || unknown.Error.Code != -32602 {
			t.Fatalf("unknown taskId: %d %s, want -32602", unknown.status, unknown.body)
		}
		// Another caller's task answers as a task that does not exist, to
		// the byte (the request id aside), whatever the method.
		for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
			more := ""
			if method == "tasks/update" {
				more = `,"inputResponses":{"confirm":{"action":"accept"}}`
			}
			other := taskCall(t, h, "mallory", method, id, more)
			missing := taskCall(t, h, "mallory", method, "no-such-task", more)
			if other.status != missing.status || other.body != missing.body || other.Error == nil || other.Error.Code != -32602 {
				t.Errorf("%s of another caller's task:\n%d %s\nof a missing task:\n%d %s", method, other.status, other.body, missing.status, missing.body)
			}
			if other.body != unknown.body {
				t.Errorf("%s of another caller's task: %s, want %s", method, other.body, unknown.body)
			}
		}
		if d := getTask(t, h, "alice", id); d.Status != tasks.StatusWorking {
			t.Fatalf("after another caller's calls: %+v, want still working", d)
		}

		tests := []struct {
			name       string
			method     string
			mcpName    string
			body       string
			wantStatus int
			wantCode   int
			wantData   string
		}{
			{
				name: "missing extension", method: "tasks/get", mcpName: id,
				body:       `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"` + id + `",` + plainMeta + `}}`,
				wantStatus: http.StatusOK, wantCode: -32021,
				wantData: `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`,
			},
			{
				name: "Mcp-Name mismatch", method: "tasks/get", mcpName: "another-task",
				body:       `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"` + id + `",` + tasksMeta + `}}`,
				wantStatus: http.StatusBadRequest, wantCode: -32020,
			},
			{
				name: "Mcp-Method mismatch", method: "tasks/cancel", mcpName: id,
				body:       `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"` + id + `",` + tasksMeta + `}}`,
				wantStatus: http.StatusBadRequest, wantCode: -32020,
			},
			{
				name: "no taskId", method: "tasks/get",
				body:       `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{` + tasksMeta + `}}`,
				wantStatus: http.StatusOK, wantCode: -32602,
			},
			{
				name: "tasks/result", method: "tasks/result", mcpName: id,
				body:       `{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"` + id + `",` + tasksMeta + `}}`,
				wantStatus: http.StatusOK, wantCode: -32601,
			},
			{
				name: "tasks/list", method: "tasks/list",
				body:       `{"jsonrpc":"2.0","id":3,"method":"tasks/list","params":{` + tasksMeta + `}}`,
				wantStatus: http.StatusOK, wantCode: -32601,
			},
		}
		for _, tt := range tests { // no subtests in a bubble
			r := send(t, h, "alice", tt.method, tt.mcpName, tt.body)
			if r.status != tt.wantStatus || r.Error == nil || r.Error.Code != tt.wantCode || string(r.ID) != "3" {
				t.Errorf("%s: %d %s, want %d with error %d", tt.name, r.status, r.body, tt.wantStatus, tt.wantCode)
				continue
			}
			if tt.wantData != "" && string(r.Error.Data) != tt.wantData {
				t.Errorf("%s: error data %s, want %s", tt.name, r.Error.Data, tt.wantData)
			}
		}
		if d := getTask(t, h, "alice", id); d.Status != tasks.StatusWorking {
			t.Fatalf("after the refused requests: %+v, want still working", d)
		}
	})
}

// TestTaskToolsWithoutExtension calls task-supporting tools from a client
// that did not declare the extension.
func TestTaskToolsWithoutExtension(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		h, _ := taskEndpoint(t)
		// A tool that runs only as a task is refused, naming the extension.
		r := callTool(t, h, "alice", "failing_job", `{}`, false)
		if r.Error == nil || r.Error.Code != -32021 || string(r.Error.Data) != `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}` {
			t.Fatalf("required-task tool without the extension: %d %s, want -32021", r.status, r.body)
		}
		// A tool that may run as a task answers plainly.
		r = callTool(t, h, "alice", "slow_compute", `{"seconds":0,"label":"now"}`, false)
		if r.Error != nil || strings.Contains(string(r.Result), `"taskId"`) {
			t.Fatalf("optional-task tool without the extension: %s, want a plain result", r.body)
		}
		if text, isErr := resultText(t, r.Result); isErr || !strings.Contains(text, `Computed "now"`) {
			t.Fatalf("result %s", r.Result)
		}
		// A tool that never runs as a task answers plainly with the
		// extension declared.
		r = callTool(t, h, "alice", "greet", `{"name":"Ada"}`, true)
		if text, _ := resultText(t, r.Result); r.Error != nil || text != "Hello, Ada!" {
			t.Fatalf("greet with the extension: %s", r.body)
		}
	})
}

// TestTasksOverStdio checks that no call becomes a task over stdio, where
// nobody could ask tasks/get: an optional-task tool answers plainly and a
// required-task one is refused, even from a client declaring the extension.
func TestTasksOverStdio(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		cat, err := toolsets.New(toolsets.Options{Toolsets: []string{"conformance"}}, toolsets.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		mgr := tasks.NewManager(tasks.Options{}, tasks.Deps{Store: tasks.NewMemoryStore(nil)})
		server := New(cat, Options{}, Deps{Transport: Stdio, Version: "test", Tasks: mgr}).SDK()
		call := func(id int, tool, args string) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,%s}}`, id, tool, args, tasksMeta)
		}
		input := strings.Join([]string{
			initLine("2025-11-25"), initializedLine,
			call(2, "slow_compute", `{"seconds":1,"label":"stdio"}`),
			call(3, "failing_job", `{}`),
		}, "\n") + "\n"
		o := serveInput(t, server, input, 0)
		wantResult(t, o, "2", `Computed \"stdio\" after 1s`)
		wantError(t, o, "3", -32021)
		if mgr.OldestLive() != 0 {
			t.Error("a task runs after the stdio calls")
		}
	})
}

// TestTaskMethodsWithTasksOff sends tasks/ methods to an endpoint without
// the extension: they are unknown methods (Options.Tasks), whatever the
// request declares.
func TestTaskMethodsWithTasksOff(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		h := endpoint{sets: []string{"conformance"}}.handler(t)
		for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel", "tasks/list"} {
			for _, meta := range []string{tasksMeta, plainMeta} {
				r := send(t, h, "alice", method, "",
					`{"jsonrpc":"2.0","id":5,"method":"`+method+`","params":{"taskId":"x","inputResponses":{},`+meta+`}}`)
				if r.Error == nil || r.Error.Code != -32601 {
					t.Errorf("%s with %s: %d %s, want -32601", method, meta, r.status, r.body)
				}
			}
		}
		// A task-supporting tool answers plainly.
		r := callTool(t, h, "alice", "slow_compute", `{"seconds":0}`, true)
		if r.Error != nil || strings.Contains(string(r.Result), `"taskId"`) {
			t.Errorf("slow_compute with tasks off: %s, want a plain result", r.body)
		}
	})
}

// TestTaskCapsOverHTTP fills a caller's share of tasks: the next call
// that would become a task is refused with -32000, whether the whole
// call is the task or the handler starts it; other callers go on.
func TestTaskCapsOverHTTP(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		h, _ := taskSetup{opts: tasks.Options{MaxPerPrincipal: 1}}.endpoint(t)
		first := createTask(t, h, "alice", "slow_compute", `{"seconds":600}`)
		r := callTool(t, h, "alice", "slow_compute", `{"seconds":600}`, true)
		if r.Error == nil || r.Error.Code != -32000 || !strings.Contains(r.Error.Message, "Too many tasks") {
			t.Errorf("second task: %d %s, want -32000 too many tasks", r.status, r.body)
		}
		r = send(t, h, "alice", "tools/call", "test_tool_with_task",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_tool_with_task","arguments":{},"inputResponses":{"user_name":{"action":"accept","content":{"name":"Ada"}}},`+tasksMeta+`}}`)
		if r.Error == nil || r.Error.Code != -32000 || !strings.Contains(r.Error.Message, "Too many tasks") {
			t.Errorf("a task the handler starts: %d %s, want -32000 too many tasks", r.status, r.body)
		}
		createTask(t, h, "bob", "slow_compute", `{"seconds":600}`)
		// A task that ends frees the place.
		taskCall(t, h, "alice", "tasks/cancel", first, "")
		createTask(t, h, "alice", "slow_compute", `{"seconds":600}`)
	})
}

// TestTaskRequestState runs a task whose tool keeps state between input
// rounds (requestState): the state comes back to the next round however
// long the client took to answer within the task's TTL, past the sealed
// state's lifetime, and without a sealing key at all, since it never
// leaves the server.
func TestTaskRequestState(t *testing.T) {
	add := func(c *catalog.Catalog) {
		catalog.AddTaskTool(c, &sdk.Tool{Name: "stateful"}, func(_ context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			if req.Params.RequestState == "" {
				return &sdk.CallToolResult{
					InputRequests: sdk.InputRequestMap{"q": &sdk.ElicitParams{Message: "Go on?", RequestedSchema: map[string]any{"type": "object"}}},
					RequestState:  "step-1",
				}, nil, nil
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "state " + req.Params.RequestState}}}, nil, nil
		}, tasks.ToolTasks{Support: tasks.SupportOptional})
	}
	tests := []struct {
		name    string
		sealTTL time.Duration
		think   time.Duration
	}{
		{name: "answered quickly", sealTTL: 10 * time.Minute, think: time.Minute},
		{name: "answered after the seal's lifetime", sealTTL: 10 * time.Minute, think: 15 * time.Minute},
		{name: "no sealing key", think: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				h, _ := taskSetup{sealTTL: tt.sealTTL, add: add}.endpoint(t)
				id := createTask(t, h, "alice", "stateful", `{}`)
				synctest.Wait()
				if d := getTask(t, h, "alice", id); d.Status != tasks.StatusInputRequired {
					t.Fatalf("after the call: %+v", d)
				}
				time.Sleep(tt.think)
				r := taskCall(t, h, "alice", "tasks/update", id, `,"inputResponses":{"q":{"action":"accept","content":{}}}`)
				if r.Error != nil {
					t.Fatalf("tasks/update: %s", r.body)
				}
				synctest.Wait()
				d := getTask(t, h, "alice", id)
				if d.Status != tasks.StatusCompleted {
					t.Fatalf("after the answer: %+v (error %+v), want completed", d, d.Error)
				}
				if text, _ := resultText(t, d.Result); text != "state step-1" {
					t.Fatalf("result %s, want the first round's state", d.Result)
				}
			})
		})
	}
}

// downStore is a task store that cannot be reached.
type downStore struct{ *tasks.MemoryStore }

func (downStore) Create(context.Context, *tasks.Task, tasks.Caps) error {
	return errors.New("dial tcp: connection refused")
}

// TestTaskStoreDown calls task-supporting tools while the task store is
// unreachable: a tool that may run as a task answers synchronously, one
// that runs only as a task fails with an internal error that does not
// leak the store's error.
func TestTaskStoreDown(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		h, mgr := taskSetup{store: downStore{tasks.NewMemoryStore(nil)}}.endpoint(t)
		r := callTool(t, h, "alice", "slow_compute", `{"seconds":1,"label":"sync"}`, true)
		if text, _ := resultText(t, r.Result); r.Error != nil || !strings.Contains(text, `Computed "sync"`) {
			t.Errorf("optional-task tool with the store down: %s, want a plain result", r.body)
		}
		r = callTool(t, h, "alice", "failing_job", `{}`, true)
		if r.Error == nil || r.Error.Code != -32603 || strings.Contains(r.body, "refused") {
			t.Errorf("required-task tool with the store down: %s, want -32603 without the store's error", r.body)
		}
		if mgr.StoreUp() {
			t.Error("StoreUp = true after failed creates")
		}
	})
}
