package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
	"github.com/portcullis-mcp/portcullis/mcp"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// tasksMeta is the _meta of a 2026-07-28 request whose client declares
// the tasks extension; plainMeta declares nothing.
const (
	tasksMeta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	plainMeta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
)

// tasksUpstream serves, as an upstream over HTTP, a Portcullis MCP server
// with the tasks extension whose tool "slow" may run as a task and ends
// when release is closed.
func tasksUpstream(t *testing.T, release <-chan struct{}) *httptest.Server {
	t.Helper()
	cat := catalog.New(nil)
	catalog.AddTaskTool(cat, &sdk.Tool{Name: "slow"}, func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil, nil
	}, tasks.ToolTasks{Support: tasks.SupportOptional})
	mgr := tasks.NewManager(tasks.Options{}, tasks.Deps{Store: tasks.NewMemoryStore(nil)})
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		mgr.Shutdown(ctx)
	})
	srv := httptest.NewServer(mcp.New(cat, mcp.Options{}, mcp.Deps{Version: "up", Tasks: mgr}).Handler())
	t.Cleanup(srv.Close)
	return srv
}

// tasksFront is Portcullis with the tasks upstream as "be": its /mcp
// handler behind a bearer check whose token is the caller's name.
func tasksFront(t *testing.T, upstreamURL string) http.Handler {
	t.Helper()
	cat, err := toolsets.New(toolsets.Options{}, toolsets.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New([]Options{{Name: "be", Transport: TransportHTTP, URL: upstreamURL, Required: true}}, cat, Deps{Backoff: fastBackoff})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	t.Cleanup(func() { within(t, "Manager.Close", func() { m.Close() }) })
	waitFor(t, "ready", func() bool { return m.Ready(context.Background()) == nil })
	sealer, err := mcp.NewSealer([][]byte{mcp.NewRandomKey()}, 10*time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	mgr := tasks.NewManager(tasks.Options{}, tasks.Deps{Store: tasks.NewMemoryStore(nil)})
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		mgr.Shutdown(ctx)
	})
	h := mcp.New(cat, mcp.Options{}, mcp.Deps{Version: "front", Tasks: mgr, Sealer: sealer, RemoteTasks: m.RouteTask}).Handler()
	verify := func(_ context.Context, token string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		return &sdkauth.TokenInfo{UserID: "https://issuer.test|" + token}, nil
	}
	return sdkauth.RequireBearerToken(verify, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
}

// rpcAnswer is one JSON-RPC answer, its members raw.
type rpcAnswer struct {
	Result map[string]json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// post sends a 2026-07-28 request as caller who and decodes the last
// message of the answer.
func post(t *testing.T, h http.Handler, who, method, name, params string) rpcAnswer {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params)
	req := httptest.NewRequestWithContext(callCtx(t), http.MethodPost, "http://front.test/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	req.Header.Set("Authorization", "Bearer "+who)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	raw, _ := io.ReadAll(rec.Result().Body)
	last := string(raw)
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(strings.NewReader(last))
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				last = data
			}
		}
	}
	var a rpcAnswer
	if err := json.Unmarshal([]byte(last), &a); err != nil {
		t.Fatalf("%s: the answer is not JSON-RPC (%v): %d %s", method, err, rec.Code, raw)
	}
	return a
}

func str(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s is not a string: %v", raw, err)
	}
	return s
}

func TestUpstreamTasksPassThrough(t *testing.T) {
	release := make(chan struct{})
	up := tasksUpstream(t, release)
	front := tasksFront(t, up.URL)
	call := `{"name":"be_slow","arguments":{},"_meta":` + tasksMeta + `}`

	created := post(t, front, "alice", "tools/call", "be_slow", call)
	if created.Error != nil || str(t, created.Result["resultType"]) != "task" {
		t.Fatalf("tools/call: %+v, want the upstream's task handle", created)
	}
	id := str(t, created.Result["taskId"])
	if !strings.HasPrefix(id, "remote.") {
		t.Errorf("task ID %q: want Portcullis's remote task ID", id)
	}
	get := func(who, id string) rpcAnswer {
		return post(t, front, who, "tasks/get", id, fmt.Sprintf(`{"taskId":%q,"_meta":%s}`, id, tasksMeta))
	}
	working := get("alice", id)
	if working.Error != nil || str(t, working.Result["status"]) != "working" || str(t, working.Result["taskId"]) != id {
		t.Fatalf("tasks/get: %+v, want the task working under the caller's ID", working)
	}
	// The ID is the caller's: another caller's get, and a tampered ID,
	// find no task.
	for _, c := range []struct{ who, id string }{{"bob", id}, {"alice", id + "x"}, {"alice", "remote.v1.bogus"}} {
		if a := get(c.who, c.id); a.Error == nil || !strings.Contains(a.Error.Message, "Task not found") {
			t.Errorf("tasks/get of %s as %s: %+v, want Task not found", c.id, c.who, a)
		}
	}
	// tasks/cancel reaches the upstream: a second task is cancelled there.
	second := post(t, front, "alice", "tools/call", "be_slow", call)
	id2 := str(t, second.Result["taskId"])
	if a := post(t, front, "alice", "tasks/cancel", id2, fmt.Sprintf(`{"taskId":%q,"_meta":%s}`, id2, tasksMeta)); a.Error != nil {
		t.Fatalf("tasks/cancel: %+v", a)
	}
	if s := str(t, get("alice", id2).Result["status"]); s != "cancelled" {
		t.Errorf("after tasks/cancel the task is %q, want cancelled", s)
	}

	close(release)
	waitFor(t, "the task completed", func() bool {
		a := get("alice", id)
		return a.Error == nil && str(t, a.Result["status"]) == "completed"
	})
	done := get("alice", id)
	var result sdk.CallToolResult
	if err := json.Unmarshal(done.Result["result"], &result); err != nil || len(result.Content) != 1 || result.Content[0].(*sdk.TextContent).Text != "done" {
		t.Errorf("completed task's result %s (%v), want the upstream tool's \"done\"", done.Result["result"], err)
	}

	// A caller that does not declare the extension gets the call's result.
	plain := post(t, front, "alice", "tools/call", "be_slow", `{"name":"be_slow","arguments":{},"_meta":`+plainMeta+`}`)
	if plain.Error != nil || strings.Contains(string(plain.Result["resultType"]), "task") {
		t.Errorf("tools/call without the extension: %+v, want a plain result", plain)
	}
}
