//go:build e2e

package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
)

// The four curl calls of a first "test with curl" walkthrough, bodies
// verbatim. Like curl, the test sends no Mcp-Session-Id and no
// MCP-Protocol-Version header: each call stands alone.
const (
	seed000Initialize = `{
  "jsonrpc": "2.0",
  "id": 1,
  "method": "initialize",
  "params": {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "curl", "version": "1.0"}
  }
}`
	seed000Initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	seed000ToolsList   = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	seed000CallPingME  = `{
  "jsonrpc": "2.0",
  "id": 3,
  "method": "tools/call",
  "params": {"name": "PingME", "arguments": {}}
}`
)

func TestSeed000CurlWalkthrough(t *testing.T) {
	srv := startServer(t, []string{"PORTCULLIS_TOOLS_TOOLSETS=core"})
	url := srv.MCPURL()
	client := &http.Client{}

	t.Run("initialize", func(t *testing.T) {
		resp, body := postMCP(t, client, url, seed000Initialize, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status = %d, want 200; body: %s", resp.StatusCode, body)
		}
		var res struct {
			ProtocolVersion string                     `json:"protocolVersion"`
			Capabilities    map[string]json.RawMessage `json:"capabilities"`
			ServerInfo      struct{ Name string }      `json:"serverInfo"`
		}
		raw := rpcResult(t, rpcMessages(t, resp.Header.Get("Content-Type"), body), "1")
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatalf("initialize result: %v\n%s", err, raw)
		}
		if _, ok := res.Capabilities["tools"]; !ok {
			t.Errorf("capabilities has no tools: %s", raw)
		}
		if res.ProtocolVersion != "2025-06-18" {
			t.Errorf("protocolVersion = %q, want the client's 2025-06-18", res.ProtocolVersion)
		}
		if res.ServerInfo.Name == "" {
			t.Errorf("serverInfo.name is empty: %s", raw)
		}
	})

	t.Run("notifications/initialized", func(t *testing.T) {
		resp, body := postMCP(t, client, url, seed000Initialized, nil)
		if resp.StatusCode != http.StatusAccepted {
			t.Errorf("status = %d, want 202; body: %s", resp.StatusCode, body)
		}
		if len(body) != 0 {
			t.Errorf("body = %q, want empty", body)
		}
	})

	t.Run("tools/list", func(t *testing.T) {
		resp, body := postMCP(t, client, url, seed000ToolsList, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status = %d, want 200; body: %s", resp.StatusCode, body)
		}
		var res struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		}
		raw := rpcResult(t, rpcMessages(t, resp.Header.Get("Content-Type"), body), "2")
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatalf("tools/list result: %v\n%s", err, raw)
		}
		found := false
		for _, tool := range res.Tools {
			if tool.Name == "PingME" {
				found = true
				if len(tool.InputSchema) == 0 {
					t.Errorf("PingME has no inputSchema")
				}
			}
		}
		if !found {
			t.Errorf("tools/list has no PingME: %s", raw)
		}
	})

	t.Run("tools/call PingME", func(t *testing.T) {
		resp, body := postMCP(t, client, url, seed000CallPingME, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status = %d, want 200; body: %s", resp.StatusCode, body)
		}
		var res toolResult
		raw := rpcResult(t, rpcMessages(t, resp.Header.Get("Content-Type"), body), "3")
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatalf("tools/call result: %v\n%s", err, raw)
		}
		if res.IsError {
			t.Errorf("isError = true: %s", raw)
		}
		if len(res.Content) != 1 || res.Content[0].Type != "text" || res.Content[0].Text != "BISMILLAH" {
			t.Errorf("content = %s, want one text block \"BISMILLAH\"", raw)
		}
	})
}
