package portcullis

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// directUpstream is an upstream MCP server of the 2026-07-28 era: a go-sdk
// server (tools echo and slow) behind a handler that answers the calls of
// the tools raw, rawfail and rawask itself, with results that carry a
// member no SDK type has ("x-extra"): a result that reaches the caller
// with it was passed on as it came, not decoded and encoded again.
// rawtask answers with a task handle. rawask asks for input (an elicitation) with requestState "up-1" and
// answers once the retry brings both back.
func directUpstream(t *testing.T) string {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "direct-upstream"}, nil)
	obj := map[string]any{"type": "object"}
	s.AddTool(&sdk.Tool{Name: "echo", InputSchema: obj}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var in struct{ Text string }
		_ = json.Unmarshal(req.Params.Arguments, &in)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "slow", InputSchema: obj}, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second): // the test server's Close waits for it
		}
		return nil, ctx.Err()
	})
	for _, name := range []string{"raw", "rawfail", "rawask", "rawtask"} {
		s.AddTool(&sdk.Tool{Name: name, InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return nil, fmt.Errorf("%s is answered by the wrapper", name)
		})
	}
	sdkHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, PropagateRequestCancellation: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Header.Get("Mcp-Name")
		if r.Header.Get("Mcp-Method") != "tools/call" || !strings.HasPrefix(name, "raw") {
			sdkHandler.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		msg, err := jsonrpc.DecodeMessage(body)
		call, ok := msg.(*jsonrpc.Request)
		if err != nil || !ok {
			http.Error(w, "not a request", http.StatusBadRequest)
			return
		}
		var p struct {
			RequestState   string                     `json:"requestState"`
			InputResponses map[string]json.RawMessage `json:"inputResponses"`
		}
		_ = json.Unmarshal(call.Params, &p)
		result := `{"content":[{"type":"text","text":"as sent"}],"resultType":"complete","x-extra":{"kept":true}}`
		switch {
		case name == "rawtask":
			// A task handle the caller did not ask for.
			result = `{"resultType":"task","task":{"taskId":"up-task-1","status":"working","ttlMs":60000}}`
		case name == "rawfail":
			result = `{"content":[{"type":"text","text":"it failed"}],"isError":true,"resultType":"complete","x-extra":{"kept":true}}`
		case name == "rawask" && p.RequestState == "":
			result = `{"resultType":"input_required","requestState":"up-1","inputRequests":{"q":{"method":"elicitation/create","params":{"mode":"form","message":"Name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}}}}`
		case name == "rawask" && (p.RequestState != "up-1" || p.InputResponses["q"] == nil):
			result = `{"content":[{"type":"text","text":"wrong retry: ` + p.RequestState + `"}],"isError":true,"resultType":"complete"}`
		case name == "rawask":
			result = `{"content":[{"type":"text","text":"answered"}],"resultType":"complete","x-extra":{"kept":true}}`
		}
		out, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: call.ID, Result: json.RawMessage(result)})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// directCall posts a tools/call of revision 2026-07-28 of tool with the
// members of params (besides name and _meta), and meta added to the
// client's, and returns the status and the decoded answer.
func directCall(t *testing.T, base, token, tool string, params, meta map[string]any, header map[string]string) (int, map[string]json.RawMessage) {
	t.Helper()
	m := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "direct-test", "version": "1"},
	}
	for k, v := range meta {
		m[k] = v
	}
	p := map[string]any{"name": tool, "arguments": map[string]any{}, "_meta": m}
	for k, v := range params {
		p[k] = v
	}
	raw, _ := json.Marshal(p)
	id, _ := jsonrpc.MakeID(float64(7))
	body, _ := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: id, Method: "tools/call", Params: raw})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "text/event-stream") {
		// The last data line is the response.
		for line := range strings.Lines(string(data)) {
			if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data:"); ok {
				data = []byte(strings.TrimSpace(d))
			}
		}
	}
	var answer map[string]json.RawMessage
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		if err := json.Unmarshal(data, &answer); err != nil {
			t.Fatalf("%s: %v in %s", tool, err, data)
		}
	}
	return resp.StatusCode, answer
}

// serverName is the name of the server a result's _meta names
// (SEP-2575).
func serverName(res map[string]json.RawMessage) string {
	var meta struct {
		ServerInfo struct{ Name string } `json:"io.modelcontextprotocol/serverInfo"`
	}
	_ = json.Unmarshal(res["_meta"], &meta)
	return meta.ServerInfo.Name
}

// resultOf returns the result members of an answer, failing the test
// on an error.
func resultOf(t *testing.T, what string, answer map[string]json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var res map[string]json.RawMessage
	if answer["error"] != nil || json.Unmarshal(answer["result"], &res) != nil {
		t.Fatalf("%s: no result: %s", what, answer["error"])
	}
	return res
}

// A 2026-07-28 call of an upstream tool over the direct hop is served
// without the SDK server: the upstream's result reaches the caller as it
// came, members no SDK type has included, while a call that asks for
// progress takes the SDK server and gets the same content. Both run the
// same middleware: the tool timeout, requestState sealing (the
// upstream's multi-round trip, the retry routed back), telemetry (the
// operation metric, with the tool's error result counted as such). A
// request the SDK refuses is refused as before.
func TestDirectCalls(t *testing.T) {
	up := directUpstream(t)
	cfg := writeConfig(t, fmt.Sprintf(`tools:
  toolsets: []
upstreams:
  - name: be
    transport: http
    url: %s
    required: true
mcp:
  tool_timeouts:
    - tool: be_slow
      timeout: 300ms
`, up))
	base, issuer, metrics := startDevMetrics(t, "--config", cfg)
	token := devToken(t, issuer, "alice", base+"/mcp")
	// The upstream is required: ready means its tools are served.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("not ready after 10s")
		}
	}

	extra := func(res map[string]json.RawMessage) string { return string(res["x-extra"]) }
	text := func(res map[string]json.RawMessage) string {
		var c []struct{ Text string }
		_ = json.Unmarshal(res["content"], &c)
		if len(c) == 0 {
			return ""
		}
		return c[0].Text
	}

	t.Run("passed on as it came", func(t *testing.T) {
		_, answer := directCall(t, base, token, "be_raw", nil, nil, nil)
		res := resultOf(t, "be_raw", answer)
		if extra(res) != `{"kept":true}` || text(res) != "as sent" || string(res["resultType"]) != `"complete"` {
			t.Errorf("be_raw: result %v, want the upstream's as sent, x-extra included", res)
		}
		if got := serverName(res); got != "portcullis" {
			t.Errorf("be_raw: the result names the server %q, want portcullis (the upstream named none)", got)
		}
	})
	t.Run("with progress, by the SDK server", func(t *testing.T) {
		_, answer := directCall(t, base, token, "be_raw", nil, map[string]any{"progressToken": "p1"}, nil)
		res := resultOf(t, "be_raw with progress", answer)
		if extra(res) != "" || text(res) != "as sent" {
			t.Errorf("be_raw with a progress token: result %v, want the same content through the SDK server (which drops x-extra)", res)
		}
	})
	t.Run("an SDK-served tool", func(t *testing.T) {
		_, answer := directCall(t, base, token, "be_echo", map[string]any{"arguments": map[string]any{"text": "hi"}}, nil, nil)
		res := resultOf(t, "be_echo", answer)
		if text(res) != "hi" || string(res["resultType"]) != `"complete"` {
			t.Errorf("be_echo: %v", res)
		}
		// As through the SDK server: a result that names its server keeps
		// the name.
		if got := serverName(res); got != "direct-upstream" {
			t.Errorf("be_echo: the result names the server %q, want the upstream's", got)
		}
	})
	t.Run("multi-round trip", func(t *testing.T) {
		_, answer := directCall(t, base, token, "be_rawask", nil, nil, nil)
		res := resultOf(t, "be_rawask", answer)
		var state string
		_ = json.Unmarshal(res["requestState"], &state)
		if string(res["resultType"]) != `"input_required"` || res["inputRequests"] == nil || state == "" || strings.Contains(state, "up-1") {
			t.Fatalf("be_rawask: %v, want input_required with a sealed requestState", res)
		}
		retry := map[string]any{
			"requestState":   state,
			"inputResponses": map[string]any{"q": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}},
		}
		_, answer = directCall(t, base, token, "be_rawask", retry, nil, nil)
		if res := resultOf(t, "be_rawask retry", answer); text(res) != "answered" || extra(res) != `{"kept":true}` {
			t.Errorf("be_rawask retry: %v, want the upstream's answer", res)
		}
		retry["requestState"] = state[:len(state)-2] + "xx"
		// -32602 is answered with 400 on 2026-07-28 (SEP-2575).
		status, answer := directCall(t, base, token, "be_rawask", retry, nil, nil)
		var jerr jsonrpc.Error
		if status != http.StatusBadRequest || json.Unmarshal(answer["error"], &jerr) != nil || jerr.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("a tampered requestState: %d %v, want 400 -32602", status, answer)
		}
		other := devToken(t, issuer, "mallory", base+"/mcp")
		retry["requestState"] = state
		status, answer = directCall(t, base, other, "be_rawask", retry, nil, nil)
		if status != http.StatusBadRequest || json.Unmarshal(answer["error"], &jerr) != nil || jerr.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("another caller's requestState: %d %v, want 400 -32602", status, answer)
		}
	})
	t.Run("a task handle not asked for", func(t *testing.T) {
		// As through the SDK server: decoded as a tool result, which it
		// is not, so nothing of it reaches the caller.
		_, answer := directCall(t, base, token, "be_rawtask", nil, nil, nil)
		res := resultOf(t, "be_rawtask", answer)
		if string(res["resultType"]) != `"complete"` || strings.Contains(string(answer["result"]), "up-task-1") {
			t.Errorf("be_rawtask: %s, want a complete result without the upstream's task", answer["result"])
		}
	})
	t.Run("tool timeout", func(t *testing.T) {
		_, answer := directCall(t, base, token, "be_slow", nil, nil, nil)
		res := resultOf(t, "be_slow", answer)
		if string(res["isError"]) != "true" || !strings.Contains(text(res), "did not finish within 300ms") || string(res["resultType"]) != `"complete"` {
			t.Errorf("be_slow: %v, want the timeout's error result", res)
		}
	})
	t.Run("refused as by the SDK", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			header map[string]string
			meta   map[string]any
		}{
			{"Mcp-Name mismatch", map[string]string{"Mcp-Name": "be_echo"}, nil},
			{"no Mcp-Method", map[string]string{"Mcp-Method": ""}, nil},
			{"Accept without event streams", map[string]string{"Accept": "application/json"}, nil},
			{"no client capabilities", nil, map[string]any{"io.modelcontextprotocol/clientCapabilities": nil}},
		} {
			status, answer := directCall(t, base, token, "be_raw", nil, tc.meta, tc.header)
			if status == http.StatusOK && answer["error"] == nil {
				t.Errorf("%s: status %d, answer %v, want a refusal", tc.name, status, answer)
			}
		}
	})
	t.Run("telemetry", func(t *testing.T) {
		_, answer := directCall(t, base, token, "be_rawfail", nil, nil, nil)
		if res := resultOf(t, "be_rawfail", answer); string(res["isError"]) != "true" || extra(res) == "" {
			t.Fatalf("be_rawfail: %v", res)
		}
		resp, err := http.Get(metrics)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		page, _ := io.ReadAll(resp.Body)
		for _, want := range []string{`gen_ai_tool_name="be_raw"`, `error_type="tool_error",gen_ai_operation_name="execute_tool",gen_ai_prompt_name="",gen_ai_tool_name="be_rawfail"`} {
			found := false
			for line := range strings.Lines(string(page)) {
				if strings.HasPrefix(line, "mcp_server_operation_duration_seconds_count{") && strings.Contains(line, want) {
					found = true
				}
			}
			if !found {
				t.Errorf("/metrics has no mcp_server_operation_duration_seconds_count with %s", want)
			}
		}
		// Each call is one operation, its -32602 answer (HTTP 400) included:
		// four calls of be_rawask, in the multi-round trip subtest.
		var calls float64
		var series []string
		for line := range strings.Lines(string(page)) {
			if strings.HasPrefix(line, "mcp_server_operation_duration_seconds_count{") && strings.Contains(line, `gen_ai_tool_name="be_rawask"`) {
				var n float64
				_, _ = fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &n)
				calls += n
				series = append(series, strings.TrimSpace(line))
			}
		}
		if calls != 4 {
			t.Errorf("be_rawask: %v operations recorded, want 4:\n%s", calls, strings.Join(series, "\n"))
		}
	})
}
