package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// routed is one request a fake RemoteRouter got.
type routed struct {
	source, method string
	params         map[string]json.RawMessage
}

// fakeRemote is a RemoteRouter that records what it gets and answers
// with answer.
type fakeRemote struct {
	mu     sync.Mutex
	got    []routed
	answer func(method string) (json.RawMessage, error)
}

func (f *fakeRemote) route(_ context.Context, source, method string, params json.RawMessage) (json.RawMessage, error) {
	var p map[string]json.RawMessage
	_ = json.Unmarshal(params, &p)
	f.mu.Lock()
	f.got = append(f.got, routed{source, method, p})
	f.mu.Unlock()
	return f.answer(method)
}

func (f *fakeRemote) calls() []routed {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]routed(nil), f.got...)
}

// proxied adds the tool "proxied", which stands for a call forwarded to
// an upstream that answers with its task handle "up-1" when the call may
// become a remote task, and with a plain result otherwise.
func proxied(c *catalog.Catalog) {
	catalog.AddTool(c, &sdk.Tool{Name: "proxied"}, func(ctx context.Context, _ *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
		handle := json.RawMessage(`{"resultType":"task","taskId":"up-1","status":"working","ttlMs":60000,"createdAt":"2026-01-01T00:00:00.000Z","lastUpdatedAt":"2026-01-01T00:00:00.000Z"}`)
		if tasks.SetRemote(ctx, "up", handle) {
			return &sdk.CallToolResult{}, nil, nil
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "plain"}}}, nil, nil
	})
}

func TestRemoteTasks(t *testing.T) {
	fake := &fakeRemote{answer: func(method string) (json.RawMessage, error) {
		switch method {
		case "tasks/get":
			return json.RawMessage(`{"resultType":"complete","taskId":"up-1","status":"completed","result":{"content":[{"type":"text","text":"done"}]}}`), nil
		case "tasks/update":
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "upstream says no"}
		}
		return nil, errors.New("connection refused")
	}}
	h, _ := taskSetup{sealTTL: time.Minute, add: proxied, remote: fake.route}.endpoint(t)

	created := send(t, h, "alice", "tools/call", "proxied", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"proxied","arguments":{},`+tasksMeta+`}}`)
	var handle map[string]json.RawMessage
	if created.Error != nil || json.Unmarshal(created.Result, &handle) != nil {
		t.Fatalf("tools/call: %s", created.body)
	}
	var id string
	_ = json.Unmarshal(handle["taskId"], &id)
	if !strings.HasPrefix(id, remoteTaskPrefix) || string(handle["status"]) != `"working"` || string(handle["resultType"]) != `"task"` {
		t.Fatalf("task handle %s, want the upstream's under a remote task ID", created.Result)
	}

	taskReq := func(who, method, id, extra string) rpc {
		return send(t, h, who, method, id, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":%q,"params":{"taskId":%q,%s%s}}`, method, id, extra, tasksMeta))
	}
	got := taskReq("alice", "tasks/get", id, "")
	var res map[string]json.RawMessage
	if got.Error != nil || json.Unmarshal(got.Result, &res) != nil || string(res["taskId"]) != fmt.Sprintf("%q", id) || string(res["status"]) != `"completed"` {
		t.Fatalf("tasks/get: %s, want the upstream's answer under the caller's task ID", got.body)
	}
	calls := fake.calls()
	if len(calls) != 1 || calls[0].source != "up" || calls[0].method != "tasks/get" || string(calls[0].params["taskId"]) != `"up-1"` || calls[0].params["_meta"] != nil {
		t.Fatalf("routed %+v, want one tasks/get of up-1 to \"up\" without the caller's _meta", calls)
	}

	// The upstream's JSON-RPC error passes as it is; a failure to reach
	// it is a server error.
	if a := taskReq("alice", "tasks/update", id, `"inputResponses":{},`); a.Error == nil || a.Error.Code != jsonrpc.CodeInvalidParams || a.Error.Message != "upstream says no" {
		t.Errorf("tasks/update: %s, want the upstream's -32602", a.body)
	}
	if a := taskReq("alice", "tasks/cancel", id, ""); a.Error == nil || a.Error.Code != -32000 {
		t.Errorf("tasks/cancel with the upstream down: %s, want -32000", a.body)
	}

	// Another caller, a tampered ID and one sealed with another key find
	// no task, and nothing is routed.
	before := len(fake.calls())
	sealer, _ := NewSealer([][]byte{NewRandomKey()}, time.Minute, nil)
	other, _ := sealer.SealUntil(`{"s":"up","t":"up-1"}`, remoteTaskDigest, "https://issuer.test|alice", time.Now().Add(time.Hour))
	for _, c := range []struct{ who, id string }{{"bob", id}, {"alice", id[:len(id)-2]}, {"alice", remoteTaskPrefix + other}} {
		if a := taskReq(c.who, "tasks/get", c.id, ""); a.Error == nil || a.Error.Message != taskNotFoundMessage {
			t.Errorf("tasks/get of %.20s… as %s: %s, want task not found", c.id, c.who, a.body)
		}
	}
	if n := len(fake.calls()); n != before {
		t.Errorf("%d more requests routed upstream, want none", n-before)
	}

	// A caller that does not declare the extension gets the plain result.
	plain := send(t, h, "alice", "tools/call", "proxied", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"proxied","arguments":{},`+plainMeta+`}}`)
	if text, _ := resultText(t, plain.Result); text != "plain" {
		t.Errorf("tools/call without the extension: %s, want the plain result", plain.body)
	}
}

func TestRemoteTaskIDWithoutRouter(t *testing.T) {
	// With no remote tasks, an ID that looks like one is no task.
	h, _ := taskSetup{sealTTL: time.Minute, add: proxied}.endpoint(t)
	a := send(t, h, "alice", "tasks/get", "remote.v1.x", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"remote.v1.x",`+tasksMeta+`}}`)
	if a.Error == nil || a.Error.Message != taskNotFoundMessage {
		t.Errorf("tasks/get: %s, want task not found", a.body)
	}
	plain := send(t, h, "alice", "tools/call", "proxied", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"proxied","arguments":{},`+tasksMeta+`}}`)
	if text, _ := resultText(t, plain.Result); text != "plain" {
		t.Errorf("tools/call: %s, want the plain result: without a router no call becomes a remote task", plain.body)
	}
}

func TestRemoteTaskIDBinding(t *testing.T) {
	// A remote task ID opens only for its owner, before it expires, and a
	// requestState of the same key cannot pass for one.
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sealer, err := NewSealer([][]byte{NewRandomKey()}, time.Minute, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	rt := &remoteTasks{sealer: sealer, now: func() time.Time { return now }}
	res, err := rt.handle("up", json.RawMessage(`{"resultType":"task","taskId":"up-1","ttlMs":1000}`), "alice")
	if err != nil {
		t.Fatal(err)
	}
	var id string
	_ = json.Unmarshal(res.(*rawResult).fields["taskId"], &id)
	if got, ok := rt.open(id, "alice"); !ok || got != (remoteTaskID{Source: "up", ID: "up-1"}) {
		t.Fatalf("open as the owner: %+v %v", got, ok)
	}
	if _, ok := rt.open(id, "bob"); ok {
		t.Error("the ID opened for another caller")
	}
	state, _ := sealer.Seal(`{"s":"up","t":"up-1"}`, requestDigest("tools/call", "x", nil), "alice")
	if _, ok := rt.open(remoteTaskPrefix+state, "alice"); ok {
		t.Error("a requestState opened as a remote task ID")
	}
	now = now.Add(remoteTaskSlack + 2*time.Second) // past ttlMs and the slack
	if _, ok := rt.open(id, "alice"); ok {
		t.Error("the ID opened after it expired")
	}
	if _, err := rt.handle("up", json.RawMessage(`{"resultType":"task"}`), "alice"); err == nil {
		t.Error("a handle without taskId was passed on")
	}
}
