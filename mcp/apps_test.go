package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/curation"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// appServers are two upstreams serving one App (prefixes a and b), each
// with the App's tool get-time, its app-only tool poll, a tool of its own,
// a tool with a fixed mode on views (args, which answers with its
// arguments) and two tools the policy guards; and the upstream up, which
// serves no App. Every call answers "<prefix>:<name> <arguments>".
type appServers struct {
	direct atomic.Int32
	mu     sync.Mutex
	calls  []string // "<prefix>:<name>" of each call
}

func (s *appServers) answer(prefix, name string, req *sdk.CallToolRequest) string {
	s.mu.Lock()
	s.calls = append(s.calls, prefix+":"+name)
	s.mu.Unlock()
	var args any
	_ = json.Unmarshal(req.Params.Arguments, &args)
	b, _ := json.Marshal(args)
	return prefix + ":" + name + " " + string(b)
}

func (s *appServers) called() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *appServers) set(prefix string, own string) catalog.Set {
	tool := func(name, meta string) catalog.SetTool {
		t := &sdk.Tool{Name: prefix + "_" + name, InputSchema: json.RawMessage(`{"type":"object"}`)}
		if meta != "" {
			_ = json.Unmarshal([]byte(meta), &t.Meta)
		}
		return catalog.SetTool{
			Tool: t,
			Handler: func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s.answer(prefix, name, req)}}}, nil
			},
			Direct: func(_ context.Context, req *sdk.CallToolRequest) (sdk.Result, error) {
				s.direct.Add(1)
				b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": s.answer(prefix, name, req)}}})
				return &catalog.RawToolResult{JSON: b}, nil
			},
		}
	}
	return catalog.Set{
		Origin: prefix, Prefix: prefix,
		Tools: []catalog.SetTool{
			tool("get-time", `{"ui":{"resourceUri":"ui://`+prefix+`/get-time/mcp-app.html"}}`),
			tool("poll", `{"ui":{"visibility":["app"]}}`),
			tool(own, ""),
			tool("args", ""),
			tool("secret", ""),
			tool("guarded", ""),
		},
		Resources: []catalog.SetResource{{
			Resource: &sdk.Resource{URI: "ui://" + prefix + "/get-time/mcp-app.html", Name: "app", MIMEType: "text/html;profile=mcp-app"},
			Handler: func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
				return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/html;profile=mcp-app", Text: "<html>" + prefix + "</html>"}}}, nil
			},
		}},
	}
}

// appCatalog is the core toolset, a and b (a's own tool only-a, b's
// only-b) and up.
func appCatalog(tb testing.TB, s *appServers) *catalog.Catalog {
	return appCatalogOf(tb, s, true)
}

// appCatalogOf is appCatalog, where a and b serve no App unless apps:
// their tools say nothing of Apps, and they have no ui:// resource.
func appCatalogOf(tb testing.TB, s *appServers, apps bool) *catalog.Catalog {
	tb.Helper()
	cat, err := toolsets.New(toolsets.Options{Toolsets: []string{"core"}}, toolsets.Deps{})
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range [][2]string{{"a", "only-a"}, {"b", "only-b"}} {
		set := s.set(p[0], p[1])
		if !apps {
			for _, t := range set.Tools {
				t.Tool.Meta = nil
			}
			set.Resources = nil
		}
		if _, err := cat.SetSource("upstream "+p[0], set); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := cat.SetSource("upstream up", (&spy{}).set()); err != nil {
		tb.Fatal(err)
	}
	return cat
}

// appPolicy hides *_secret from callers without the scope apps:secret
// and makes *_guarded need apps:guarded (a step-up).
func appPolicy(info *sdkauth.TokenInfo, tool string) (bool, []string, bool) {
	has := func(s string) bool { return info != nil && slices.Contains(info.Scopes, s) }
	switch {
	case strings.HasSuffix(tool, "_secret"):
		return has("apps:secret"), []string{"apps:secret"}, true
	case strings.HasSuffix(tool, "_guarded"):
		return has("apps:guarded"), []string{"apps:guarded"}, false
	}
	return true, nil, false
}

// appEndpoint serves cat on /mcp behind a bearer check whose token is
// the caller's scopes, space-separated ("-" for none), with appPolicy,
// the step-up 403, and a middleware that records each tools/call as the
// layers see it: the name, and CalledAs.
func appEndpoint(t *testing.T, cat *catalog.Catalog, exposure *curation.Exposure, seen *[]string) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	record := func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if r, ok := req.(*sdk.CallToolRequest); ok && seen != nil {
				mu.Lock()
				*seen = append(*seen, r.Params.Name+" as "+CalledAs(ctx))
				mu.Unlock()
			}
			return next(ctx, method, req)
		}
	}
	deps := Deps{
		Version: "t", Policy: appPolicy, Exposure: exposure, Middleware: []sdk.Middleware{record},
		StepUp: func(w http.ResponseWriter, _ *http.Request, scopes []string) {
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="`+strings.Join(scopes, " ")+`"`)
			w.WriteHeader(http.StatusForbidden)
		},
	}
	h := New(cat, Options{}, deps).Handler()
	verify := func(_ context.Context, token string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		var scopes []string
		if token != "-" {
			scopes = strings.Fields(strings.ReplaceAll(token, "+", " "))
		}
		return &sdkauth.TokenInfo{UserID: "u", Scopes: scopes}, nil
	}
	ts := httptest.NewServer(sdkauth.RequireBearerToken(verify, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h))
	t.Cleanup(ts.Close)
	return ts
}

// appCall calls name with args in era on the endpoint at url with the
// bearer token: a 2025-11-25 request without a session, or a 2026-07-28
// one whose Mcp-Name is header (name when empty).
func appCall(t *testing.T, url, token, era, name, args, header string) response {
	t.Helper()
	h := map[string]string{"Authorization": "Bearer " + token, "Mcp-Protocol-Version": era}
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `}}`
	if era == modernHdr {
		h["Mcp-Method"], h["Mcp-Name"] = "tools/call", cmpOr(header, name)
		body = modernCall(name, args)
	}
	return post(t, url, body, h)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// appText is the text of a response's result, or "" for an error.
func appText(r response) string {
	res, _ := r.message["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	c, _ := content[0].(map[string]any)
	s, _ := c["text"].(string)
	return s
}

// TestAppCallsByUpstreamNames checks, in both eras and on the direct path,
// that a call of a tool by the name its App server gave it reaches that
// tool when one upstream offers the name, is refused naming the listed
// tools when several do, and is an unknown tool for an upstream that serves
// no App; that the layers see the listed name, and CalledAs the name used.
func TestAppCallsByUpstreamNames(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			s := &appServers{}
			var seen []string
			ts := appEndpoint(t, appCatalog(t, s), nil, &seen)
			full := "apps:secret+apps:guarded"

			r := appCall(t, ts.URL, full, era, "only-a", `{"x":1}`, "")
			if got := appText(r); got != `a:only-a {"x":1}` {
				t.Fatalf("only-a: %d %s, want a's tool", r.status, r.body)
			}
			if !slices.Contains(seen, "a_only-a as only-a") {
				t.Errorf("the middleware saw %q, want a_only-a called as only-a", seen)
			}
			if era == modernHdr && s.direct.Load() != 1 {
				t.Errorf("%d direct calls, want the call served directly", s.direct.Load())
			}
			// A listed name is called as it is.
			seen = nil
			if r := appCall(t, ts.URL, full, era, "a_get-time", `{}`, ""); appText(r) != "a:get-time {}" || !slices.Equal(seen, []string{"a_get-time as "}) {
				t.Errorf("a_get-time: %s, seen %q", r.body, seen)
			}
			// A name both serve is refused, naming both.
			before := len(s.called())
			for _, name := range []string{"get-time", "poll", "secret"} {
				r := appCall(t, ts.URL, full, era, name, `{}`, "")
				msg := errorMessage(r.message)
				if errorCode(r.message) != jsonrpc.CodeInvalidParams || !strings.Contains(msg, "Ambiguous") ||
					!strings.Contains(msg, `"a_`+name+`", "b_`+name+`"`) {
					t.Errorf("%s: %d %s, want the ambiguity error naming a_%s and b_%s", name, r.status, r.body, name, name)
				}
			}
			if len(s.called()) != before {
				t.Errorf("an ambiguous name reached %v", s.called()[before:])
			}
			// An upstream without Apps: its tools by their listed names only.
			if r := appCall(t, ts.URL, full, era, "search", `{"q":"x","org":"acme"}`, ""); !strings.Contains(errorMessage(r.message), `Unknown tool: "search"`) {
				t.Errorf("search of an upstream without Apps: %s, want an unknown tool", r.body)
			}
			if era == modernHdr {
				// The header names what the body names.
				r := appCall(t, ts.URL, full, era, "only-a", `{}`, "a_only-a")
				if r.status != http.StatusBadRequest || appText(r) != "" {
					t.Errorf("Mcp-Name a_only-a, body only-a: %d %s, want the SDK's 400", r.status, r.body)
				}
			}
		})
	}
}

// TestAppCallsHoldThePolicy checks that a tool reached by its upstream's
// name is held to the policy of its listed name: hidden from a caller
// without its scope (and not counted among the tools the name stands for),
// the step-up 403 for a tool the caller sees.
func TestAppCallsHoldThePolicy(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			s := &appServers{}
			cat := catalog.New(nil)
			if _, err := cat.SetSource("upstream a", s.set("a", "only-a")); err != nil {
				t.Fatal(err)
			}
			ts := appEndpoint(t, cat, nil, nil)
			for _, name := range []string{"secret", "a_secret"} {
				r := appCall(t, ts.URL, "-", era, name, `{}`, "")
				msg := errorMessage(r.message)
				_, hint, _ := strings.Cut(msg, "Available tools:")
				if !strings.Contains(msg, "Unknown tool: \""+name+"\"") || strings.Contains(hint, "a_secret") {
					t.Errorf("%s without the scope: %d %s, want an unknown tool that names no hidden tool", name, r.status, r.body)
				}
			}
			for _, name := range []string{"guarded", "a_guarded"} {
				r := appCall(t, ts.URL, "-", era, name, `{}`, "")
				if r.status != http.StatusForbidden || !strings.Contains(r.header.Get("WWW-Authenticate"), "apps:guarded") {
					t.Errorf("%s without the scope: %d %s, want the step-up 403", name, r.status, r.body)
				}
			}
			if len(s.called()) != 0 {
				t.Fatalf("refused calls reached %v", s.called())
			}
			for _, name := range []string{"secret", "guarded"} {
				if r := appCall(t, ts.URL, "apps:secret+apps:guarded", era, name, `{}`, ""); appText(r) != "a:"+name+" {}" {
					t.Errorf("%s with the scopes: %d %s", name, r.status, r.body)
				}
			}
			// Of two tools a name stands for, one hidden: the other is the
			// one the caller sees.
			if _, err := cat.SetSource("upstream b", s.set("b", "only-b")); err != nil {
				t.Fatal(err)
			}
			r := appCall(t, ts.URL, "apps:guarded", era, "secret", `{}`, "")
			if !strings.Contains(errorMessage(r.message), `Unknown tool: "secret"`) {
				t.Errorf("secret, hidden in both: %s, want an unknown tool", r.body)
			}
		})
	}
}

// TestAppCallsOnAView checks that on a virtual server a name stands only
// for the tools the view serves (by the names it exposes them under, with
// their fixed arguments), the app-only tools of an App it serves included.
func TestAppCallsOnAView(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			s := &appServers{}
			cat := appCatalog(t, s)
			view := &curation.Exposure{Tools: []curation.ToolSelection{
				{Source: "a", Name: "get-time", ExposeAs: "clock"},
				{Source: "a", Name: "args", FixedArguments: map[string]json.RawMessage{"mode": json.RawMessage(`"safe"`)}},
				{Source: "a", Name: "secret"},
			}}
			var seen []string
			ts := appEndpoint(t, cat, view, &seen)
			full := "apps:secret+apps:guarded"
			tests := []struct {
				name, args, want string
				seen             string
			}{
				{name: "get-time", args: `{}`, want: "a:get-time {}", seen: "clock as get-time"},
				{name: "poll", args: `{}`, want: "a:poll {}", seen: "a_poll as poll"},
				{name: "args", args: `{"q":1}`, want: `a:args {"mode":"safe","q":1}`, seen: "a_args as args"},
				{name: "secret", args: `{}`, want: "a:secret {}"},
			}
			for _, tt := range tests {
				seen = nil
				r := appCall(t, ts.URL, full, era, tt.name, tt.args, "")
				if got := appText(r); got != tt.want {
					t.Errorf("%s: %d %s, want %s", tt.name, r.status, r.body, tt.want)
				}
				if tt.seen != "" && !slices.Contains(seen, tt.seen) {
					t.Errorf("%s: the middleware saw %q, want %q", tt.name, seen, tt.seen)
				}
			}
			before := len(s.called())
			// What the view does not serve, by any name; a fixed argument
			// smuggled in by case.
			for _, c := range []struct{ name, args string }{
				{"only-a", `{}`}, {"a_only-a", `{}`}, {"a_get-time", `{}`}, {"guarded", `{}`},
				{"args", `{"MODE":"unsafe"}`}, {"args", `{"mode":"unsafe"}`}, {"a_args", `{"mode":"unsafe"}`},
			} {
				r := appCall(t, ts.URL, full, era, c.name, c.args, "")
				if errorCode(r.message) != jsonrpc.CodeInvalidParams {
					t.Errorf("%s %s: %d %s, want -32602", c.name, c.args, r.status, r.body)
				}
			}
			if got := s.called()[before:]; len(got) != 0 {
				t.Errorf("refused calls reached %v", got)
			}
		})
	}
}

// BenchmarkResolveToolName measures the gate's resolution of a listed
// name (what every call of a tool pays) and of an App's name: each is
// one map lookup, and neither allocates.
func BenchmarkResolveToolName(b *testing.B) {
	s := &appServers{}
	cat := appCatalog(b, s)
	g := newToolGate(nil, nil, cat, nil, false)
	for _, bc := range []struct{ name, tool, want string }{
		{"listed name of an upstream without Apps", "up_search", ""},
		{"listed name of an App's upstream", "a_only-a", ""},
		{"the upstream's own name", "only-a", "a_only-a"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got, _ := g.resolve(b.Context(), nil, bc.tool); got != bc.want {
					b.Fatalf("resolve(%q) = %q", bc.tool, got)
				}
			}
		})
	}
}

// TestResolveAllocates checks that resolving a listed name, what every
// tools/call pays, allocates nothing.
func TestResolveAllocates(t *testing.T) {
	cat := appCatalog(t, &appServers{})
	g := newToolGate(nil, nil, cat, nil, false)
	ctx := t.Context()
	for _, name := range []string{"up_search", "a_only-a", "only-a", "no-such-tool"} {
		if n := testing.AllocsPerRun(100, func() { g.resolve(ctx, nil, name) }); n != 0 {
			t.Errorf("resolve(%q): %v allocations", name, n)
		}
	}
}

// appCallRequest is a 2026-07-28 tools/call of tool with args, as a
// client sends it.
func appCallRequest(tb testing.TB, tool, args string) *http.Request {
	req, err := http.NewRequest(http.MethodPost, "http://example.test/mcp", strings.NewReader(modernCall(tool, args)))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header = http.Header{
		"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {modernHdr}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {tool},
	}
	return req
}

// serveAppCall serves one call of tool on h and fails unless it worked.
func serveAppCall(tb testing.TB, h http.Handler, tool, args string) {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, appCallRequest(tb, tool, args))
	if w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"error"`) || strings.Contains(w.Body.String(), `"isError":true`) {
		tb.Fatalf("%s: status %d: %s", tool, w.Code, w.Body)
	}
}

// BenchmarkAppCall measures a 2026-07-28 call of an upstream's tool on
// the direct path: of an upstream without Apps on an endpoint that serves
// none (server=plain) and on one that also serves Apps (server=apps),
// which must cost the same (the two endpoints have the same tools, whose
// _meta says nothing of Apps on the first); and an App's tool by its
// listed name and by its upstream's own name (one map lookup more):
//
//	go test -run '^$' -bench AppCall -count 10 ./mcp | benchstat -col /server -
func BenchmarkAppCall(b *testing.B) {
	plainH := New(appCatalogOf(b, &appServers{}, false), Options{}, Deps{Version: "t"}).Handler()
	appsH := New(appCatalog(b, &appServers{}), Options{}, Deps{Version: "t"}).Handler()
	for _, tt := range []struct {
		name       string
		h          http.Handler
		tool, args string
	}{
		{name: "tool=up_search/server=plain", h: plainH, tool: "up_search", args: `{"q":"x","org":"acme"}`},
		{name: "tool=up_search/server=apps", h: appsH, tool: "up_search", args: `{"q":"x","org":"acme"}`},
		{name: "tool=a_only-a/server=apps", h: appsH, tool: "a_only-a", args: `{}`},
		{name: "tool=only-a/server=apps", h: appsH, tool: "only-a", args: `{}`},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				serveAppCall(b, tt.h, tt.tool, tt.args)
			}
		})
	}
}

// TestAppsCostOtherCallsNothing checks that a call of a tool of an
// upstream without Apps allocates no more on an endpoint that also serves
// Apps than on one that serves none. The two means are compared as they
// are: testing.AllocsPerRun rounds each down to a whole number, and a mean
// near one (145.05 under -race) then reads 145 or 144 by chance.
func TestAppsCostOtherCallsNothing(t *testing.T) {
	allocs := func(cat *catalog.Catalog) float64 {
		h := New(cat, Options{}, Deps{Version: "t"}).Handler()
		call := func() { serveAppCall(t, h, "up_search", `{"q":"x","org":"acme"}`) }
		for range 50 {
			call()
		}
		return meanAllocs(1000, call)
	}
	without, with := allocs(appCatalogOf(t, &appServers{}, false)), allocs(appCatalog(t, &appServers{}))
	// The race detector's sync.Pool drops a quarter of what is put back,
	// at random, so under -race a call's count varies by about one; the
	// comparison is exact only without it (go test ./...).
	margin := 0.5
	if raceEnabled {
		margin = 2
	}
	if with > without+margin {
		t.Errorf("a call of up_search allocates %.2f times on an endpoint that serves Apps, %.2f on one that serves none", with, without)
	}
}

// meanAllocs returns the mean number of heap allocations of a call of f
// over runs calls, unrounded.
func meanAllocs(runs int, f func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(runs)
}

// TestAppTaskCall checks the task-augmented form: an App's call by its
// upstream's name of a tool that runs as a task becomes the listed tool's
// task.
func TestAppTaskCall(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		s := &appServers{}
		add := func(c *catalog.Catalog) {
			if _, err := c.SetSource("upstream a", s.set("a", "only-a")); err != nil {
				t.Fatal(err)
			}
			c.SetTaskSupport("a_only-a", tasks.ToolTasks{Support: tasks.SupportOptional})
		}
		h, _ := taskSetup{add: add}.endpoint(t)
		id := createTask(t, h, "alice", "only-a", `{"n":1}`)
		synctest.Wait()
		d := getTask(t, h, "alice", id)
		if d.Status != tasks.StatusCompleted {
			t.Fatalf("the task: %+v (error %+v), want completed", d, d.Error)
		}
		if text, _ := resultText(t, d.Result); text != `a:only-a {"n":1}` {
			t.Fatalf("result %s, want a_only-a's", d.Result)
		}
	})
}
