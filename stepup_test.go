package portcullis

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStepUp: a tool guarded by scopes is listed to every caller, and a
// call without its scopes gets the spec's step-up answer, 403
// insufficient_scope naming what to ask for (the scopes the token holds
// and those the call needs); a rule marked hidden, and a rule of roles
// only, hide their tool instead; the stepped-up token calls the tool.
func TestStepUp(t *testing.T) {
	cfg := writeConfig(t, `auth:
  policy:
    - tool: echo
      scopes: [echo:use]
    - tool: time
      scopes: [time:read]
      hidden: true
    - tool: calculator
      roles: [sre]
`)
	base, issuer, _ := startDevMetrics(t, "--config", cfg)
	resource := base + "/mcp"
	alice := devToken(t, issuer, "alice", resource, "mcp:basic")

	list := mcpPost(t, resource, alice, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	body, _ := io.ReadAll(list.Body)
	if list.StatusCode != http.StatusOK || !strings.Contains(string(body), `"name":"echo"`) ||
		strings.Contains(string(body), `"name":"time"`) || strings.Contains(string(body), `"name":"calculator"`) {
		t.Fatalf("tools/list without scopes: status %d, want echo listed, time and calculator hidden:\n%s", list.StatusCode, body)
	}

	call := func(token, tool, args string) (*http.Response, string) {
		r := mcpPost(t, resource, token, "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`)
		b, _ := io.ReadAll(r.Body)
		return r, string(b)
	}
	r, b := call(alice, "echo", `{"text":"hi"}`)
	challenge := r.Header.Get("WWW-Authenticate")
	if r.StatusCode != http.StatusForbidden || !strings.Contains(challenge, `error="insufficient_scope"`) ||
		!strings.Contains(challenge, `scope="mcp:basic echo:use"`) || !strings.Contains(challenge, `resource_metadata="`) {
		t.Errorf("echo without its scope: status %d, WWW-Authenticate %q, want 403 insufficient_scope naming mcp:basic echo:use\n%s", r.StatusCode, challenge, b)
	}
	for _, tool := range []string{"time", "calculator"} {
		if r, b := call(alice, tool, `{}`); r.StatusCode != http.StatusOK || !strings.Contains(b, "Unknown tool") {
			t.Errorf("%s (hidden) without its grant: status %d, want the unknown-tool answer\n%s", tool, r.StatusCode, b)
		}
	}

	stepped := devToken(t, issuer, "alice", resource, "mcp:basic", "echo:use")
	if r, b := call(stepped, "echo", `{"text":"hi"}`); r.StatusCode != http.StatusOK || !strings.Contains(b, `"text":"hi"`) {
		t.Errorf("echo with its scope: status %d\n%s", r.StatusCode, b)
	}
}

// TestStepUpAuthorizationServerOnly: with authorization_server as the
// only issuer, auth.issuers is still empty when the app is built (the
// server adds its issuer later), and step-up must be on all the same:
// a guarded tool gets the 403, not the unknown-tool answer.
func TestStepUpAuthorizationServerOnly(t *testing.T) {
	cfg, err := loadConfig(writeConfig(t, `auth:
  resource: https://mcp.example.com/mcp
  policy:
    - tool: echo
      scopes: [echo:use]
authorization_server:
  enabled: true
  idp:
    issuer: https://idp.example.com
    client_id: portcullis
    client_secret_file: /run/secrets/idp
`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := stepUp(cfg.Auth, cfg.authOn())
	if h == nil {
		t.Fatal("stepUp is nil with the authorization server on: guarded tools would be hidden instead of stepped up to")
	}
	w := httptest.NewRecorder()
	h(w, httptest.NewRequest(http.MethodPost, "/mcp", nil), []string{"echo:use"})
	if c := w.Header().Get("WWW-Authenticate"); w.Code != http.StatusForbidden || !strings.Contains(c, `error="insufficient_scope"`) || !strings.Contains(c, "echo:use") {
		t.Errorf("step-up answer: status %d, WWW-Authenticate %q; want 403 insufficient_scope naming echo:use", w.Code, c)
	}
}
