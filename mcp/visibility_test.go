package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/toolsets"
)

// coreTools are the core toolset's tools that the workshop toolset lacks
// (both have calculator).
var coreTools = []string{"PingME", "echo", "time", "whoami"}

// workshopTools are the workshop toolset's tools.
var workshopTools = []string{"calculator", "country_info", "weather"}

// hideCore is a policy that refuses every caller every tool but the
// workshop's, with a scope that must never reach a caller.
func hideCore(_ *sdkauth.TokenInfo, tool string) (bool, []string, bool) {
	if !slices.Contains(workshopTools, tool) {
		return false, []string{"core:use"}, true
	}
	return true, nil, false
}

func allowAll(*sdkauth.TokenInfo, string) (bool, []string, bool) { return true, nil, false }

// TestHiddenToolAnswersAsUnknown compares, path by path and in both eras,
// the answer to a call of a tool the policy hides with the answer to the
// same call on an endpoint where that tool does not exist: the hiding
// endpoints serve core or conformance besides workshop and hide all but
// workshop; the other serves workshop alone. The two must be the same bytes (modulo session and event
// ids), so that nothing tells a hidden tool from a missing one: not the
// status, not the error, not a "did you mean" hint.
func TestHiddenToolAnswersAsUnknown(t *testing.T) {
	hidingCore, _ := endpoint{sets: []string{"core", "workshop"}, deps: Deps{Policy: hideCore}}.start(t)
	hidingConformance, _ := endpoint{sets: []string{"conformance", "workshop"}, deps: Deps{Policy: hideCore}}.start(t)
	missing, _ := endpoint{sets: []string{"workshop"}, deps: Deps{Policy: allowAll}}.start(t)

	legacy := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	modern := func(name string) map[string]string {
		return map[string]string{"Mcp-Protocol-Version": modernHdr, "Mcp-Method": "tools/call", "Mcp-Name": name}
	}
	legacyCall := func(name string) string {
		return `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"` + name + `","arguments":{"text":"must-not-run"}}}`
	}
	modernList := `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	tests := []struct {
		name    string
		session bool // call in a legacy session
		body    func(tool string) string
		header  func(tool string) map[string]string
	}{
		{name: "legacy", body: legacyCall, header: func(string) map[string]string { return legacy }},
		{name: "legacy without a version header", body: legacyCall, header: func(string) map[string]string { return nil }},
		{name: "legacy in a session", session: true, body: legacyCall, header: func(string) map[string]string { return legacy }},
		{
			name: "legacy batch",
			body: func(tool string) string {
				return `[{"jsonrpc":"2.0","id":1,"method":"ping"},` + legacyCall(tool) + `]`
			},
			header: func(string) map[string]string { return map[string]string{"Mcp-Protocol-Version": "2025-03-26"} },
		},
		{name: "legacy tools/list", body: func(string) string { return `{"jsonrpc":"2.0","id":4,"method":"tools/list"}` }, header: func(string) map[string]string { return legacy }},
		{name: "2026-07-28", body: func(tool string) string { return modernCall(tool, `{"text":"must-not-run"}`) }, header: modern},
		{name: "2026-07-28 by _meta only", body: func(tool string) string { return modernCall(tool, `{"text":"must-not-run"}`) }, header: func(string) map[string]string { return nil }},
		{
			name:   "2026-07-28 over the body limit",
			body:   func(tool string) string { return modernCall(tool, `{"text":"`+strings.Repeat("x", 5<<20)+`"}`) },
			header: modern,
		},
		{
			name:   "2026-07-28 Mcp-Name of a visible tool",
			body:   func(tool string) string { return modernCall(tool, `{}`) },
			header: func(string) map[string]string { return modern("country_info") },
		},
		{
			name:   "2026-07-28 body naming a visible tool",
			body:   func(string) string { return modernCall("country_info", `{}`) },
			header: modern,
		},
		{
			// The SDK checks Mcp-Param-* headers against the registered
			// tool's schema (test_x_mcp_header mirrors region into
			// Mcp-Param-Region) before any middleware runs.
			name: "2026-07-28 with a mismatched Mcp-Param header",
			body: func(tool string) string { return modernCall(tool, `{"region":"us"}`) },
			header: func(tool string) map[string]string {
				h := modern(tool)
				h["Mcp-Param-Region"] = "eu"
				return h
			},
		},
		{
			name: "2026-07-28 tools/list",
			body: func(string) string { return modernList },
			header: func(string) map[string]string {
				return map[string]string{"Mcp-Protocol-Version": modernHdr, "Mcp-Method": "tools/list"}
			},
		},
	}
	// A hidden tool, and typos of hidden tools, which must not be
	// suggested, on each hiding endpoint.
	for _, h := range []struct {
		name  string
		url   string
		tools []string
	}{
		{name: "core", url: hidingCore.URL, tools: []string{"echo", "ech", "pingme"}},
		{name: "conformance", url: hidingConformance.URL, tools: []string{"test_x_mcp_header", "test_x_mcp_headr"}},
	} {
		for _, tool := range h.tools {
			for _, tt := range tests {
				t.Run(h.name+"/"+tt.name+"/"+tool, func(t *testing.T) {
					got := answer(t, h.url, tt.session, tt.body(tool), tt.header(tool))
					want := answer(t, missing.URL, tt.session, tt.body(tool), tt.header(tool))
					if got != want {
						t.Fatalf("a hidden tool answers differently from a missing one:\nhidden:  %s\nmissing: %s", got, want)
					}
					for _, leak := range []string{"must-not-run", "core:use", "insufficient_scope", `"echo"?`, `"PingME"?`, "PingME,", "echo,", `"test_x_mcp_header"?`} {
						if strings.Contains(got, leak) {
							t.Errorf("answer contains %q: %s", leak, got)
						}
					}
				})
			}
		}
	}
}

// sessionOrEventID matches what differs between two runs of the same
// exchange: session ids, and SSE event ids.
var sessionOrEventID = regexp.MustCompile(`(?m)^id: .*$|Mcp-Session-Id: \S+`)

// answer posts body to url (in a new legacy session when session is set)
// and returns the status, the headers a client acts on, and the body, as
// one string to compare.
func answer(t *testing.T, url string, session bool, body string, header map[string]string) string {
	t.Helper()
	if session {
		init := post(t, url, legacyInit, nil)
		sid := init.header.Get("Mcp-Session-Id")
		if sid == "" {
			t.Fatalf("initialize: %d %s", init.status, init.body)
		}
		h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"}
		post(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
		for k, v := range header {
			h[k] = v
		}
		h["Mcp-Protocol-Version"] = "2025-06-18"
		header = h
	}
	r := post(t, url, body, header)
	var b strings.Builder
	b.WriteString(http.StatusText(r.status))
	for _, k := range []string{"Content-Type", "WWW-Authenticate", "Cache-Control", "Mcp-Session-Id"} {
		if v := r.header.Get(k); v != "" {
			b.WriteString("\n" + k + ": " + v)
		}
	}
	// The answers to a batch's requests come as SSE events in any order
	// (JSON-RPC lets a server answer a batch in any order): compare them
	// sorted.
	events := strings.Split(strings.TrimSpace(sessionOrEventID.ReplaceAllString(r.body, "")), "\n\n")
	slices.Sort(events)
	b.WriteString("\n\n" + strings.Join(events, "\n\n"))
	return sessionOrEventID.ReplaceAllString(b.String(), "")
}

// TestHiddenToolOverStdio checks the rule where no HTTP handler runs (stdio,
// in-memory): the server's own middleware answers a hidden tool as a
// missing one, and the tool does not run.
func TestHiddenToolOverStdio(t *testing.T) {
	connectTo := func(sets []string, policy ToolPolicy) *sdk.ClientSession {
		cat, err := toolsets.New(toolsets.Options{Toolsets: sets}, toolsets.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		return connect(t, New(cat, Options{}, Deps{Transport: Stdio, Version: "test", Policy: policy}).SDK())
	}
	hiding := connectTo([]string{"core", "workshop"}, hideCore)
	missing := connectTo([]string{"workshop"}, nil)
	for _, tool := range []string{"echo", "ech"} {
		params := &sdk.CallToolParams{Name: tool, Arguments: map[string]any{"text": "must-not-run"}}
		res, gotErr := hiding.CallTool(t.Context(), params)
		_, wantErr := missing.CallTool(t.Context(), params)
		if gotErr == nil || wantErr == nil {
			t.Fatalf("%s: errors %v and %v, want both; result %+v", tool, gotErr, wantErr, res)
		}
		if gotErr.Error() != wantErr.Error() {
			t.Errorf("%s: hidden answers %q, missing %q", tool, gotErr, wantErr)
		}
	}
	got, err := hiding.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range got.Tools {
		if slices.Contains(coreTools, tl.Name) {
			t.Errorf("tools/list shows hidden %s", tl.Name)
		}
	}
}

// TestDenialHook checks that every call answered as an unknown tool is
// reported once, with the reason: the policy, or no such tool.
func TestDenialHook(t *testing.T) {
	denials := make(chan Denial, 10)
	hook := func(_ context.Context, d Denial) { denials <- d }
	ts, _ := endpoint{deps: Deps{Policy: hideCore, OnDenied: hook}}.start(t)
	legacy := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	call := func(name string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":{}}}`
	}
	post(t, ts.URL, call("echo"), legacy)
	post(t, ts.URL, call("nope"), legacy)
	post(t, ts.URL, modernCall("time", `{}`), map[string]string{"Mcp-Protocol-Version": modernHdr, "Mcp-Method": "tools/call", "Mcp-Name": "time"})
	post(t, ts.URL, call("weather"), legacy) // not registered here
	want := []Denial{
		{Tool: "echo", Reason: DenialPolicy, Needed: []string{"core:use"}},
		{Tool: "nope", Reason: DenialUnknownTool},
		{Tool: "time", Reason: DenialPolicy, Needed: []string{"core:use"}},
		{Tool: "weather", Reason: DenialUnknownTool},
	}
	// The handler reports a denial before it answers.
	close(denials)
	var got []Denial
	for d := range denials {
		got = append(got, d)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d denials %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i].Tool != want[i].Tool || got[i].Reason != want[i].Reason || !slices.Equal(got[i].Needed, want[i].Needed) {
			t.Errorf("denial %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestToolAddedWhileServing checks that the gate knows a tool a tool adds
// while the server runs (the conformance toolset's list_changed trigger),
// with a policy and without one, over both eras: before the trigger its
// name is unknown, after it the call runs.
func TestToolAddedWhileServing(t *testing.T) {
	const transient = "__transient_tool_for_list_changed"
	for _, tt := range []struct {
		name string
		deps Deps
	}{
		{name: "policy", deps: Deps{Policy: allowAll}},
		{name: "no policy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts, _ := endpoint{sets: []string{"conformance"}, deps: tt.deps}.start(t)
			call := func(tool string) response {
				return post(t, ts.URL, modernCall(tool, `{}`), map[string]string{"Mcp-Protocol-Version": modernHdr, "Mcp-Method": "tools/call", "Mcp-Name": "  " + tool + "  "})
			}
			if r := call(transient); !strings.Contains(errorMessage(r.message), "Unknown tool") {
				t.Fatalf("before the trigger: %d %s, want an unknown-tool error", r.status, r.body)
			}
			if r := call("test_trigger_tool_change"); r.status != http.StatusOK || errorCode(r.message) != 0 {
				t.Fatalf("trigger: %d %s", r.status, r.body)
			}
			if r := call(transient); r.status != http.StatusOK || errorCode(r.message) != 0 {
				t.Fatalf("after the trigger: %d %s, want a result", r.status, r.body)
			}
			legacy := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"` + transient + `","arguments":{}}}`
			if r := post(t, ts.URL, legacy, map[string]string{"Mcp-Protocol-Version": "2025-11-25"}); r.status != http.StatusOK || errorCode(r.message) != 0 {
				t.Fatalf("legacy call after the trigger: %d %s, want a result", r.status, r.body)
			}
		})
	}
}

// TestPerToolPolicy checks what a caller the policy refuses a tool gets:
// a list without it, marked private, and for a call the unknown-tool
// answer, never a 403 that would name the tool's scopes.
func TestPerToolPolicy(t *testing.T) {
	// echo needs a scope nobody here has; everything else is open.
	policy := func(info *sdkauth.TokenInfo, tool string) (bool, []string, bool) {
		if tool == "echo" {
			return false, []string{"echo:use"}, true
		}
		return true, nil, false
	}
	ts, _ := newPolicyEndpoint(t, func(o *Options) { o.MaxBodyBytes = 512 }, Deps{Policy: policy})
	modern := func(method, name string) map[string]string {
		h := map[string]string{"Mcp-Protocol-Version": modernHdr, "Mcp-Method": method}
		if name != "" {
			h["Mcp-Name"] = name
		}
		return h
	}
	tests := []struct {
		name       string
		body       string
		header     map[string]string
		wantStatus int
		want       string
		dontWant   string
	}{
		{
			name:       "list hides the tool and is private",
			body:       `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`,
			header:     modern("tools/list", ""),
			wantStatus: http.StatusOK, want: `"cacheScope":"private"`, dontWant: `"name":"echo"`,
		},
		{
			name:       "legacy call is an unknown tool",
			body:       `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`,
			header:     map[string]string{"Mcp-Protocol-Version": "2025-06-18"},
			wantStatus: http.StatusOK, want: `Unknown tool: \"echo\". Available tools: PingME, calculator, time, whoami.`, dontWant: "echo:use",
		},
		{
			name:       "2026-07-28 call is an unknown tool",
			body:       modernCall("echo", `{"text":"x"}`),
			header:     modern("tools/call", "echo"),
			wantStatus: http.StatusOK, want: `"code":-32602`, dontWant: "echo:use",
		},
		{
			// The body limit applies as to a call of any other name.
			name:       "2026-07-28 call over the body limit",
			body:       modernCall("echo", `{"text":"`+strings.Repeat("x", 1024)+`"}`),
			header:     modern("tools/call", "echo"),
			wantStatus: http.StatusRequestEntityTooLarge, want: "exceeds 512 bytes",
		},
		{
			name:       "allowed tool",
			body:       `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"PingME","arguments":{}}}`,
			wantStatus: http.StatusOK, want: "BISMILLAH",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := post(t, ts.URL, tt.body, tt.header)
			if r.status != tt.wantStatus {
				t.Fatalf("status %d, want %d\n%s", r.status, tt.wantStatus, r.body)
			}
			if !strings.Contains(r.body, tt.want) || (tt.dontWant != "" && strings.Contains(r.body, tt.dontWant)) {
				t.Fatalf("body want %q, not %q:\n%s", tt.want, tt.dontWant, r.body)
			}
			if v := r.header.Get("WWW-Authenticate"); v != "" {
				t.Errorf("WWW-Authenticate = %q, want none", v)
			}
		})
	}
}

// TestPerToolPolicyCannotBeBypassed sends tools/call requests for a denied
// tool whose routing fields disagree (headers against body, differently
// cased keys, batches): none may reach the tool; each gets an error.
func TestPerToolPolicyCannotBeBypassed(t *testing.T) {
	policy := func(_ *sdkauth.TokenInfo, tool string) (bool, []string, bool) {
		return tool != "echo", []string{"echo:use"}, true
	}
	ts, _ := newPolicyEndpoint(t, nil, Deps{Policy: policy})
	const marker = "must-not-echo"
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	call := func(params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + params + `}}`
	}
	echoArgs := `"arguments":{"text":"` + marker + `"}`
	legacy := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	modern := func(method, name string) map[string]string {
		h := map[string]string{"Mcp-Protocol-Version": modernHdr}
		if method != "" {
			h["Mcp-Method"] = method
		}
		if name != "" {
			h["Mcp-Name"] = name
		}
		return h
	}
	tests := []struct {
		name   string
		body   string
		header map[string]string
	}{
		{name: "legacy", body: call(`"name":"echo",` + echoArgs), header: legacy},
		{name: "legacy without a version header", body: call(`"name":"echo",` + echoArgs)},
		{name: "legacy with a differently cased key after", body: call(`"name":"echo","Name":"PingME",` + echoArgs), header: legacy},
		{name: "legacy with a differently cased key before", body: call(`"NAME":"PingME","name":"echo",` + echoArgs), header: legacy},
		{name: "legacy with a differently cased method key", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"ping","params":{"name":"echo",` + echoArgs + `}}`, header: legacy},
		{name: "legacy with a duplicate key", body: call(`"name":"PingME","name":"echo",` + echoArgs), header: legacy},
		{name: "legacy batch", body: `[` + call(`"name":"PingME","arguments":{}`) + `,` + strings.Replace(call(`"name":"echo",`+echoArgs), `"id":1`, `"id":2`, 1) + `]`, header: map[string]string{"Mcp-Protocol-Version": "2025-03-26"}},
		{name: "legacy batch, one id twice", body: `[` + call(`"name":"echo",`+echoArgs) + `,` + call(`"name":"PingME","arguments":{}`) + `]`, header: map[string]string{"Mcp-Protocol-Version": "2025-03-26"}},
		{name: "2026-07-28 by _meta only", body: call(`"name":"echo",` + echoArgs + `,` + meta)},
		{name: "2026-07-28", body: call(`"name":"echo",` + echoArgs + `,` + meta), header: modern("tools/call", "echo")},
		{name: "2026-07-28 Mcp-Name of an allowed tool", body: call(`"name":"echo",` + echoArgs + `,` + meta), header: modern("tools/call", "PingME")},
		{name: "2026-07-28 without Mcp-Name", body: call(`"name":"echo",` + echoArgs + `,` + meta), header: modern("tools/call", "")},
		{name: "2026-07-28 without Mcp-Method", body: call(`"name":"echo",` + echoArgs + `,` + meta), header: modern("", "PingME")},
		{name: "2026-07-28 other Mcp-Method", body: call(`"name":"echo",` + echoArgs + `,` + meta), header: modern("tools/list", "PingME")},
		{name: "2026-07-28 differently cased key", body: call(`"name":"echo","Name":"PingME",` + echoArgs + `,` + meta), header: modern("tools/call", "PingME")},
		{name: "2026-07-28 batch", body: `[` + call(`"name":"echo",`+echoArgs+`,`+meta) + `]`, header: modern("tools/call", "PingME")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := post(t, ts.URL, tt.body, tt.header)
			if strings.Contains(r.body, marker) || (r.status < 400 && !strings.Contains(r.body, `"error"`)) {
				t.Fatalf("denied tool answered: status %d\n%s", r.status, r.body)
			}
		})
	}
}

// TestBatchOfAllowedAndHiddenTools sends a 2025-03-26 batch (the last
// revision with batches) naming tools the caller sees and one it does not:
// every call gets its answer, the hidden tool's the unknown-tool error in
// its place, and the others their results; the hidden tool never runs.
func TestBatchOfAllowedAndHiddenTools(t *testing.T) {
	policy := func(_ *sdkauth.TokenInfo, tool string) (bool, []string, bool) {
		return tool != "echo", nil, true
	}
	ts, _ := newPolicyEndpoint(t, nil, Deps{Policy: policy})
	const marker = "must-not-echo"
	call := func(id int, name, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args)
	}
	tests := []struct {
		name string
		body string
		want map[int]bool // id → answered with a result (else an error)
	}{
		{
			name: "hidden tool between allowed ones",
			body: "[" + call(1, "PingME", `{}`) + "," + call(2, "echo", `{"text":"`+marker+`"}`) + "," + call(3, "PingME", `{}`) + "]",
			want: map[int]bool{1: true, 2: false, 3: true},
		},
		{
			name: "a batch of one hidden tool",
			body: "[" + call(7, "echo", `{"text":"`+marker+`"}`) + "]",
			want: map[int]bool{7: false},
		},
		{
			name: "an unknown tool and a ping",
			body: `[` + call(4, "nope", `{}`) + `,{"jsonrpc":"2.0","id":5,"method":"ping"}]`,
			want: map[int]bool{4: false, 5: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := post(t, ts.URL, tt.body, map[string]string{"Mcp-Protocol-Version": "2025-03-26"})
			if strings.Contains(r.body, marker) {
				t.Fatalf("the hidden tool ran:\n%s", r.body)
			}
			type answer struct {
				ID     int             `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			// One SSE event per answer.
			var answers []answer
			for line := range strings.Lines(r.body) {
				data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
				if !ok {
					continue
				}
				var a answer
				if err := json.Unmarshal([]byte(data), &a); err != nil {
					t.Fatalf("status %d, an event that is no answer: %v\n%s", r.status, err, r.body)
				}
				answers = append(answers, a)
			}
			got := map[int]bool{}
			for _, a := range answers {
				if a.Error != nil && a.Error.Code != jsonrpc.CodeInvalidParams && a.ID != 4 {
					t.Errorf("id %d: error code %d, want %d", a.ID, a.Error.Code, jsonrpc.CodeInvalidParams)
				}
				got[a.ID] = a.Error == nil && a.Result != nil
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("answers (id → result) %v, want %v\n%s", got, tt.want, r.body)
			}
		})
	}
}

// TestBatchRefusedWhereTheRevisionHasNone sends a batch with each
// MCP-Protocol-Version: from 2025-06-18 on it is refused before the SDK
// sees it, with 400 and a JSON-RPC error (the SDK's own refusal is plain
// text), whatever tools it names; 2025-03-26 and no header (2025-03-26 to
// the SDK) keep their batches, and a version the SDK does not know is its
// to refuse.
func TestBatchRefusedWhereTheRevisionHasNone(t *testing.T) {
	ts, _ := newPolicyEndpoint(t, nil, Deps{})
	const batch = `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","arguments":{}}},{"jsonrpc":"2.0","id":2,"method":"ping"}]`
	tests := []struct {
		version    string
		wantStatus int
		wantBody   string
	}{
		{version: "2025-11-25", wantStatus: http.StatusBadRequest, wantBody: `"code":-32600,"message":"Invalid Request: JSON-RPC batches are not supported in protocol version 2025-11-25."`},
		{version: "2025-06-18", wantStatus: http.StatusBadRequest, wantBody: `"code":-32600,"message":"Invalid Request: JSON-RPC batches are not supported in protocol version 2025-06-18."`},
		{version: "2025-03-26", wantStatus: http.StatusOK, wantBody: `"id":2,"result"`},
		{version: "", wantStatus: http.StatusOK, wantBody: `"id":2,"result"`},
		{version: "2025-13-01", wantStatus: http.StatusBadRequest, wantBody: "Unsupported protocol version"},
	}
	for _, tt := range tests {
		t.Run(cmp.Or(tt.version, "no header"), func(t *testing.T) {
			header := map[string]string{}
			if tt.version != "" {
				header["Mcp-Protocol-Version"] = tt.version
			}
			r := post(t, ts.URL, batch, header)
			if r.status != tt.wantStatus || !strings.Contains(r.body, tt.wantBody) {
				t.Errorf("status %d, want %d with %s:\n%s", r.status, tt.wantStatus, tt.wantBody, r.body)
			}
		})
	}
}
