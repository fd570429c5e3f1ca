package catalog

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/curation"
)

// appTool is a tool of an App server: meta is its _meta as JSON.
func appTool(name, meta string) SetTool {
	t := rawTool(name, `{"type":"object"}`)
	if meta != "" {
		if err := json.Unmarshal([]byte(meta), &t.Tool.Meta); err != nil {
			panic(err)
		}
	}
	return t
}

// readText returns a handler that reads text.
func readText(text string) sdk.ResourceHandler {
	return func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: text}}}, nil
	}
}

// monitorSet is what an upstream like the system monitor lists under
// prefix: an App's tool, its app-only tool, a plain tool and the App.
func monitorSet(prefix string) Set {
	return Set{
		Origin: prefix, Prefix: prefix,
		Tools: []SetTool{
			appTool(prefix+"_get-system-info", `{"ui":{"resourceUri":"ui://`+prefix+`/system-monitor/mcp-app.html"}}`),
			appTool(prefix+"_poll-system-stats", `{"ui":{"visibility":["app"]}}`),
			appTool(prefix+"_uptime", ""),
			rawTool(prefix+"_bound", `{"type":"object","properties":{"id":{"type":"string","x-mcp-header":"Id"}}}`),
		},
		Resources: []SetResource{
			{Resource: &sdk.Resource{URI: "ui://" + prefix + "/system-monitor/mcp-app.html", Name: "app", MIMEType: "text/html;profile=mcp-app"}, Handler: readText(prefix)},
			{Resource: &sdk.Resource{URI: "file:///" + prefix, Name: "notes"}, Handler: readText(prefix)},
		},
	}
}

func TestAppToolIndex(t *testing.T) {
	c := New(nil)
	if got := c.AppTool("uptime"); got != nil {
		t.Fatalf("an empty catalog: AppTool = %v", got)
	}
	for _, p := range []string{"a", "b"} {
		if _, err := c.SetSource("upstream "+p, monitorSet(p)); err != nil {
			t.Fatal(err)
		}
	}
	// A source that serves no App: its tools are called by their listed
	// names only.
	if _, err := c.SetSource("upstream gh", ghSet()); err != nil {
		t.Fatal(err)
	}
	// A source that serves Apps without a prefix: its names are listed.
	bare := monitorSet("")
	bare.Tools = []SetTool{appTool("plain", `{"ui":{"visibility":["app"]}}`)}
	bare.Resources = nil
	if _, err := c.SetSource("upstream bare", bare); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		want []string
	}{
		{name: "get-system-info", want: []string{"a_get-system-info", "b_get-system-info"}},
		{name: "poll-system-stats", want: []string{"a_poll-system-stats", "b_poll-system-stats"}},
		{name: "uptime", want: []string{"a_uptime", "b_uptime"}},
		{name: "bound"},  // binds a header: by its listed name only
		{name: "search"}, // gh serves no App
		{name: "plain"},  // no prefix: listed as it is
		{name: "a_uptime"},
	}
	for _, tt := range tests {
		if got := c.AppTool(tt.name); !slices.Equal(got, tt.want) {
			t.Errorf("AppTool(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	c.RemoveSource("upstream b")
	if got := c.AppTool("uptime"); !slices.Equal(got, []string{"a_uptime"}) {
		t.Errorf("after b left: AppTool(uptime) = %v", got)
	}
}

// TestSharedURIByOrder checks that a URI two sources offer is served by
// the one ranked first, whichever was set first, and passes to the other
// when it leaves.
func TestSharedURIByOrder(t *testing.T) {
	set := func(name string, order int) Set {
		return Set{Origin: name, Order: order, Resources: []SetResource{
			{Resource: &sdk.Resource{URI: "file:///shared", Name: "shared"}, Handler: readText(name)},
			{Resource: &sdk.Resource{URI: "file:///" + name, Name: name}, Handler: readText(name)},
		}}
	}
	read := func(t *testing.T, cs *sdk.ClientSession) string {
		t.Helper()
		res, err := cs.ReadResource(t.Context(), &sdk.ReadResourceParams{URI: "file:///shared"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Contents[0].Text
	}
	for _, tt := range []struct {
		name  string
		first string // set first
	}{{"first ranked set first", "one"}, {"first ranked set last", "two"}} {
		t.Run(tt.name, func(t *testing.T) {
			c := New(nil)
			_, cs, _ := viewServer(t, c, nil)
			order := []string{"one", "two"}
			if tt.first == "two" {
				order = []string{"two", "one"}
			}
			for _, n := range order {
				skipped, err := c.SetSource("upstream "+n, set(n, map[string]int{"one": 1, "two": 2}[n]))
				if err != nil {
					t.Fatal(err)
				}
				if want := n == "two" && tt.first == "one"; (len(skipped) > 0) != want {
					t.Errorf("SetSource(%s) skipped %v", n, skipped)
				}
			}
			if got := read(t, cs); got != "one" {
				t.Fatalf("file:///shared reads %q, want the first ranked source's", got)
			}
			c.RemoveSource("upstream one")
			if got := read(t, cs); got != "two" {
				t.Fatalf("after one left, file:///shared reads %q, want two's", got)
			}
			if _, err := c.SetSource("upstream one", set("one", 1)); err != nil {
				t.Fatal(err)
			}
			if got := read(t, cs); got != "one" {
				t.Fatalf("after one came back, file:///shared reads %q, want one's", got)
			}
			res, err := cs.ListResources(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := names(res.Resources, func(r *sdk.Resource) string { return r.URI })
			if want := []string{"file:///one", "file:///shared", "file:///two"}; !slices.Equal(got, want) {
				t.Errorf("resources = %v, want %v", got, want)
			}
		})
	}
	// One order: the name decides.
	c := New(nil)
	_, cs, _ := viewServer(t, c, nil)
	for _, n := range []string{"zed", "amy"} {
		if _, err := c.SetSource("upstream "+n, set(n, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if got := read(t, cs); got != "amy" {
		t.Errorf("one order: file:///shared reads %q, want amy's (its name sorts first)", got)
	}
}

// TestViewServesApps checks that a view selecting an App's tool serves
// the App's resource and its app-only tools, and maps the upstream's own
// names to the names it exposes.
func TestViewServesApps(t *testing.T) {
	c := New(nil)
	for _, p := range []string{"a", "b"} {
		if _, err := c.SetSource("upstream "+p, monitorSet(p)); err != nil {
			t.Fatal(err)
		}
	}
	v, cs, _ := viewServer(t, c, &curation.Exposure{Tools: []curation.ToolSelection{
		{Source: "a", Name: "get-system-info", ExposeAs: "system"},
		{Source: "b", Name: "uptime"},
	}})
	// The server has the tools under their original names; the view
	// lists them as exposed.
	got := names(v.Tools(listed(t, cs)), func(t *sdk.Tool) string { return t.Name })
	if want := []string{"a_poll-system-stats", "b_uptime", "system"}; !slices.Equal(got, want) {
		t.Errorf("tools = %v, want %v", got, want)
	}
	res, err := cs.ListResources(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	uris := names(res.Resources, func(r *sdk.Resource) string { return r.URI })
	if want := []string{"ui://a/system-monitor/mcp-app.html"}; !slices.Equal(uris, want) {
		t.Errorf("resources = %v, want the App's alone", uris)
	}
	if !v.ServesResource("ui://a/system-monitor/mcp-app.html") || v.ServesResource("ui://b/system-monitor/mcp-app.html") {
		t.Error("the view serves the wrong App")
	}
	for name, want := range map[string][]string{
		"get-system-info":   {"system"},
		"poll-system-stats": {"a_poll-system-stats"},
		"uptime":            {"b_uptime"},
		"bound":             nil,
	} {
		if got := v.AppTool(name); !slices.Equal(got, want) {
			t.Errorf("AppTool(%q) = %v, want %v", name, got, want)
		}
	}
	// A tool whose _meta says nothing of Apps brings no app-only tool.
	v2, cs2, _ := viewServer(t, c, &curation.Exposure{Tools: []curation.ToolSelection{{Source: "b", Name: "uptime"}}})
	got = names(listed(t, cs2), func(t *sdk.Tool) string { return t.Name })
	if want := []string{"b_uptime"}; !slices.Equal(got, want) {
		t.Errorf("a plain tool's view lists %v, want %v", got, want)
	}
	if v2.ServesResource("ui://b/system-monitor/mcp-app.html") {
		t.Error("a plain tool's view serves the App")
	}
	// The _meta of an App's tool passes as it is.
	for _, tl := range v.Tools(listed(t, cs)) {
		if tl.Name == "system" && !reflect.DeepEqual(tl.Meta, sdk.Meta{"ui": map[string]any{"resourceUri": "ui://a/system-monitor/mcp-app.html"}}) {
			t.Errorf("system's _meta = %v", tl.Meta)
		}
	}
}

// TestAppNamesListedStayListed checks that a name or URI something is
// listed by never stands for an App's tool or resource of that name in
// its source, in the catalog and in a view, whether it was listed before
// or after the App's source came.
func TestAppNamesListedStayListed(t *testing.T) {
	c := New(nil)
	if _, err := c.SetSource("upstream a", monitorSet("a")); err != nil {
		t.Fatal(err)
	}
	v, _, _ := viewServer(t, c, &curation.Exposure{Tools: []curation.ToolSelection{{Source: "a", Name: "get-system-info"}}})
	if got := c.AppTool("get-system-info"); !slices.Equal(got, []string{"a_get-system-info"}) {
		t.Fatalf("before: AppTool = %v", got)
	}
	// A source without a prefix lists the names and the URI a's App has
	// in a.
	bare := Set{
		Origin:    "bare",
		Tools:     []SetTool{appTool("get-system-info", `{"ui":{"resourceUri":"ui://system-monitor/mcp-app.html"}}`)},
		Resources: []SetResource{{Resource: &sdk.Resource{URI: "ui://system-monitor/mcp-app.html", Name: "app"}, Handler: readText("bare")}},
	}
	if _, err := c.SetSource("upstream bare", bare); err != nil {
		t.Fatal(err)
	}
	own := "ui://system-monitor/mcp-app.html"
	if got := c.AppTool("get-system-info"); got != nil {
		t.Errorf("a listed name: AppTool = %v, want nil", got)
	}
	if got := c.AppResource(own); got != nil {
		t.Errorf("a listed URI: AppResource = %v, want nil", got)
	}
	// The view lists neither: they stand for a's there.
	if got := v.AppTool("get-system-info"); !slices.Equal(got, []string{"a_get-system-info"}) {
		t.Errorf("view: AppTool = %v", got)
	}
	if got := v.AppResource(own); !slices.Equal(got, []string{"ui://a/system-monitor/mcp-app.html"}) {
		t.Errorf("view: AppResource = %v", got)
	}
	// A tool added to the view's server while it serves is called by its
	// name.
	AddRunningTool(c, v.s, &sdk.Tool{Name: "poll-system-stats", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest, map[string]any) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{}, nil, nil
		})
	if got := v.AppTool("poll-system-stats"); got != nil {
		t.Errorf("view: a running tool's name: AppTool = %v, want nil", got)
	}
	if got := c.AppTool("poll-system-stats"); got != nil {
		t.Errorf("a running tool's name: AppTool = %v, want nil", got)
	}
	c.RemoveSource("upstream bare")
	if got := c.AppResource(own); !slices.Equal(got, []string{"ui://a/system-monitor/mcp-app.html"}) {
		t.Errorf("after bare left: AppResource = %v", got)
	}
}

func TestAppResourceIndex(t *testing.T) {
	c := New(nil)
	c.AddResource(&sdk.Resource{URI: "ui://builtin/app.html", Name: "builtin"}, readText("builtin"))
	for _, p := range []string{"a", "b"} {
		if _, err := c.SetSource("upstream "+p, monitorSet(p)); err != nil {
			t.Fatal(err)
		}
	}
	c3 := monitorSet("c")
	c3.Resources = append(c3.Resources,
		SetResource{Resource: &sdk.Resource{URI: "ui://c/builtin/app.html", Name: "shadowed"}, Handler: readText("c")},
		SetResource{Resource: &sdk.Resource{URI: "ui://c/only-c.html", Name: "only"}, Handler: readText("c")})
	c3.Tools = c3.Tools[:1]
	c3.Tools[0] = appTool("c_only", `{"ui":{"resourceUri":"ui://c/only-c.html"}}`)
	if _, err := c.SetSource("upstream c", c3); err != nil {
		t.Fatal(err)
	}
	// A source that serves no App: its URIs are what it lists.
	if _, err := c.SetSource("upstream gh", ghSet()); err != nil {
		t.Fatal(err)
	}
	va, _, _ := viewServer(t, c, &curation.Exposure{Tools: []curation.ToolSelection{{Source: "a", Name: "get-system-info"}}})
	vc, _, _ := viewServer(t, c, &curation.Exposure{Tools: []curation.ToolSelection{{Source: "c", Name: "only"}}})
	mon := []string{"ui://a/system-monitor/mcp-app.html", "ui://b/system-monitor/mcp-app.html", "ui://c/system-monitor/mcp-app.html"}
	tests := []struct {
		uri          string
		want, va, vc []string
	}{
		{uri: "ui://system-monitor/mcp-app.html", want: mon, va: mon[:1]},
		{uri: "ui://only-c.html", want: []string{"ui://c/only-c.html"}, vc: []string{"ui://c/only-c.html"}},
		{uri: "ui://a/system-monitor/mcp-app.html"}, // listed
		{uri: "ui://builtin/app.html"},              // the catalog's own
		{uri: "file:///a"},                          // not an App's
		{uri: "file:///notes"},
		{uri: "ui://nothing.html"},
	}
	for _, tt := range tests {
		if got := c.AppResource(tt.uri); !slices.Equal(got, tt.want) {
			t.Errorf("AppResource(%q) = %v, want %v", tt.uri, got, tt.want)
		}
		if got := va.AppResource(tt.uri); !slices.Equal(got, tt.va) {
			t.Errorf("view of a: AppResource(%q) = %v, want %v", tt.uri, got, tt.va)
		}
		if got := vc.AppResource(tt.uri); !slices.Equal(got, tt.vc) {
			t.Errorf("view of c: AppResource(%q) = %v, want %v", tt.uri, got, tt.vc)
		}
	}
	c.RemoveSource("upstream b")
	c.RemoveSource("upstream c")
	if got := c.AppResource("ui://system-monitor/mcp-app.html"); !slices.Equal(got, mon[:1]) {
		t.Errorf("after b and c left: AppResource = %v", got)
	}
	if got := vc.AppResource("ui://only-c.html"); got != nil {
		t.Errorf("after c left: view of c: AppResource = %v", got)
	}
}
