package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/curation"
	"github.com/portcullis-mcp/portcullis/tasks"
)

func noop[In any](context.Context, *sdk.CallToolRequest, In) (*sdk.CallToolResult, any, error) {
	return &sdk.CallToolResult{}, nil, nil
}

func rawTool(name, schema string) SetTool {
	return SetTool{
		Tool: &sdk.Tool{Name: name, InputSchema: json.RawMessage(schema)},
		Handler: func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{}, nil
		},
	}
}

func readNothing(context.Context, *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	return &sdk.ReadResourceResult{}, nil
}

func promptNothing(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
	return &sdk.GetPromptResult{}, nil
}

const searchSchema = `{"type":"object","properties":{"q":{"type":"string"},"org":{"type":"string","enum":["acme","beta"]}},"required":["q","org"]}`

// ghSet is what the upstream "gh" (prefix gh) lists; extra tools are
// added to it.
func ghSet(extra ...SetTool) Set {
	return Set{
		Origin: "gh", Prefix: "gh",
		Tools: append([]SetTool{
			rawTool("gh_search", searchSchema),
			rawTool("gh_delete", `{"type":"object","properties":{"id":{"type":"string","x-mcp-header":"Id"}}}`),
		}, extra...),
		Prompts:   []SetPrompt{{Prompt: &sdk.Prompt{Name: "gh_review"}, Handler: promptNothing}},
		Resources: []SetResource{{Resource: &sdk.Resource{URI: "gh://readme", Name: "readme"}, Handler: readNothing}},
	}
}

// viewCatalog is a catalog with the sources a view selects from: core
// and workshop sharing calculator, declared content, a program's tool
// and the upstream gh.
func viewCatalog(t testing.TB) *Catalog {
	t.Helper()
	c := New(nil)
	type calc struct {
		A int `json:"a"`
	}
	c.SetOrigin("core")
	c.Add(NewTool(&sdk.Tool{Name: "echo"}, noop[struct {
		Text string `json:"text"`
	}]), NewTool(&sdk.Tool{Name: "calculator"}, noop[calc]))
	c.SetOrigin("workshop")
	c.Add(NewTool(&sdk.Tool{Name: "calculator"}, noop[calc]), NewTool(&sdk.Tool{Name: "weather"}, noop[any]))
	c.SetOrigin(curation.SourceDeclared)
	c.AddResource(&sdk.Resource{URI: "file:///handbook", Name: "handbook"}, readNothing)
	c.AddTemplate(&sdk.ResourceTemplate{URITemplate: "file:///docs/{name}", Name: "docs"}, readNothing)
	c.AddPrompt(&sdk.Prompt{Name: "greet"}, promptNothing)
	c.SetOrigin(curation.SourceProgram)
	AddTaskTool(c, &sdk.Tool{Name: "invoice"}, noop[any], tasks.ToolTasks{Support: tasks.SupportOptional})
	if _, err := c.SetSource("upstream gh", ghSet()); err != nil {
		t.Fatal(err)
	}
	return c
}

// viewServer registers keep of c on a new server and connects a client
// to it; changed counts the tool list changes the client is told of.
func viewServer(t *testing.T, c *Catalog, keep *curation.Exposure) (*ServerView, *sdk.ClientSession, *atomic.Int32) {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	var v *ServerView
	if keep != nil {
		v = c.RegisterView(s, *keep)
	} else {
		c.Register(s)
	}
	changed := &atomic.Int32{}
	st, ct := sdk.NewInMemoryTransports()
	ss, err := s.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed.Add(1) },
	}).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return v, cs, changed
}

func listed(t *testing.T, cs *sdk.ClientSession) []*sdk.Tool {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Tools
}

// sameJSON reports whether v encodes to the JSON value want.
func sameJSON(t *testing.T, v any, want string) bool {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var got, w any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(got, w)
}

func names[T any](xs []T, name func(T) string) []string {
	out := []string{}
	for _, x := range xs {
		out = append(out, name(x))
	}
	slices.Sort(out)
	return out
}

func toolName(t *sdk.Tool) string { return t.Name }

func TestRegisterViewSelects(t *testing.T) {
	tests := []struct {
		name       string
		view       curation.Exposure
		registered []string // on the server, by original name
		exposed    []string // as callers see them
	}{
		{name: "an empty view serves nothing", registered: []string{}, exposed: []string{}},
		{name: "a toolset", view: curation.Exposure{Tools: []curation.ToolSelection{{Source: "core"}}},
			registered: []string{"calculator", "echo"}, exposed: []string{"calculator", "echo"}},
		{name: "a tool two toolsets share is in both", view: curation.Exposure{Tools: []curation.ToolSelection{{Source: "workshop"}}},
			registered: []string{"calculator", "weather"}, exposed: []string{"calculator", "weather"}},
		{name: "the program's tools", view: curation.Exposure{Tools: []curation.ToolSelection{{Source: "program"}}},
			registered: []string{"invoice"}, exposed: []string{"invoice"}},
		{name: "an upstream's tools by their names there", view: curation.Exposure{Tools: []curation.ToolSelection{{Source: "gh", Name: "sea*"}}},
			registered: []string{"gh_search"}, exposed: []string{"gh_search"}},
		{name: "a prefixed name matches nothing", view: curation.Exposure{Tools: []curation.ToolSelection{{Source: "gh", Name: "gh_search"}}},
			registered: []string{}, exposed: []string{}},
		{name: "a renamed tool", view: curation.Exposure{Tools: []curation.ToolSelection{{Source: "gh", Name: "search", ExposeAs: "find"}}},
			registered: []string{"gh_search"}, exposed: []string{"find"}},
		{name: "a single selection takes its tool from a pattern", view: curation.Exposure{Tools: []curation.ToolSelection{
			{Source: "core"}, {Source: "core", Name: "echo", ExposeAs: "say"}}},
			registered: []string{"calculator", "echo"}, exposed: []string{"calculator", "say"}},
		{name: "one tool under two names", view: curation.Exposure{Tools: []curation.ToolSelection{
			{Source: "gh", Name: "search", ExposeAs: "search_acme", FixedArguments: map[string]json.RawMessage{"org": json.RawMessage(`"acme"`)}},
			{Source: "gh", Name: "search", ExposeAs: "search_beta", FixedArguments: map[string]json.RawMessage{"org": json.RawMessage(`"beta"`)}}}},
			registered: []string{"gh_search"}, exposed: []string{"search_acme", "search_beta"}},
		{name: "a name taken first stays taken", view: curation.Exposure{Tools: []curation.ToolSelection{
			{Source: "workshop"}, {Source: "core", Name: "echo", ExposeAs: "weather"}}},
			registered: []string{"calculator", "echo"}, exposed: []string{"calculator", "weather"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := viewCatalog(t)
			v, cs, _ := viewServer(t, c, &tt.view)
			page := listed(t, cs)
			if got := names(page, toolName); !reflect.DeepEqual(got, tt.registered) {
				t.Errorf("registered = %q, want %q", got, tt.registered)
			}
			if got := names(v.Tools(page), toolName); !reflect.DeepEqual(got, tt.exposed) {
				t.Errorf("exposed = %q, want %q", got, tt.exposed)
			}
			if got := v.ToolNames(); !reflect.DeepEqual(names(got, func(s string) string { return s }), tt.exposed) {
				t.Errorf("ToolNames = %q, want %q", got, tt.exposed)
			}
		})
	}
}

func TestServerViewMaps(t *testing.T) {
	c := viewCatalog(t)
	v, cs, _ := viewServer(t, c, &curation.Exposure{
		Tools: []curation.ToolSelection{
			{Source: "gh", Name: "search", ExposeAs: "find", Description: "Find code of ours.",
				FixedArguments: map[string]json.RawMessage{"org": json.RawMessage(`"acme"`)}, Arguments: map[string]curation.Argument{"q": {Description: "What to find"}}},
			{Source: "core", Name: "echo"},
			{Source: "program"},
		},
		Resources: []curation.ResourceSelection{{Source: "declared", URI: "file:///handbook", ExposeAs: "Handbook"}, {Source: "declared", URI: "file:///docs/*"}},
		Prompts:   []curation.PromptSelection{{Source: "gh", Name: "review", ExposeAs: "review_pr", Title: "Review a PR"}},
	})

	for _, tc := range []struct {
		name, original string
		has            bool
	}{
		{"find", "gh_search", true},
		{"echo", "echo", true},
		{"invoice", "invoice", true},
		{"gh_search", "", false}, // the original name of a renamed tool
		{"search", "", false},    // its name in the upstream
		{"gh_delete", "", false}, // a tool the view leaves out
		{"calculator", "", false},
		{"nope", "", false},
	} {
		tool, ok := v.Tool(tc.name)
		if ok != tc.has || v.HasTool(tc.name) != tc.has || (ok && tool.Original != tc.original) {
			t.Errorf("Tool(%q) = %+v, %v, HasTool %v; want original %q, %v", tc.name, tool, ok, v.HasTool(tc.name), tc.original, tc.has)
		}
	}
	if got := v.Original("find"); got != "gh_search" {
		t.Errorf("Original(find) = %q", got)
	}
	if got := v.TaskSupport("invoice"); got.Support != tasks.SupportOptional {
		t.Errorf("TaskSupport(invoice) = %+v, want the tool's", got)
	}

	find, _ := v.Tool("find")
	args, err := find.Arguments(json.RawMessage(`{"q":"x"}`))
	if err != nil || string(args) != `{"q":"x","org":"acme"}` {
		t.Errorf("Arguments = %s, %v", args, err)
	}
	if _, err := find.Arguments(json.RawMessage(`{"q":"x","ORG":"beta"}`)); !errors.Is(err, curation.ErrFixedArgument) {
		t.Errorf("Arguments naming the fixed one: %v, want ErrFixedArgument", err)
	}

	var got *sdk.Tool
	for _, tl := range v.Tools(listed(t, cs)) {
		if tl.Name == "find" {
			got = tl
		}
	}
	if got == nil || got.Description != "Find code of ours." {
		t.Fatalf("listed find = %+v", got)
	}
	if want := `{"type":"object","properties":{"q":{"type":"string","description":"What to find"}},"required":["q"]}`; !sameJSON(t, got.InputSchema, want) {
		t.Errorf("find's input schema = %v, want %s", got.InputSchema, want)
	}

	for _, tc := range []struct {
		name, original string
		ok             bool
	}{
		{"review_pr", "gh_review", true},
		{"gh_review", "gh_review", false}, // renamed
		{"greet", "greet", false},         // left out
		{"added_later", "added_later", true},
	} {
		if orig, ok := v.Prompt(tc.name); orig != tc.original || ok != tc.ok {
			t.Errorf("Prompt(%q) = %q, %v; want %q, %v", tc.name, orig, ok, tc.original, tc.ok)
		}
	}
	pres, err := cs.ListPrompts(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ps := v.Prompts(pres.Prompts); len(ps) != 1 || ps[0].Name != "review_pr" || ps[0].Title != "Review a PR" {
		t.Errorf("Prompts = %+v", ps)
	}

	for uri, want := range map[string]bool{"file:///handbook": true, "file:///docs/a": true, "gh://readme": false, "file:///other": false} {
		if got := v.ServesResource(uri); got != want {
			t.Errorf("ServesResource(%q) = %v, want %v", uri, got, want)
		}
	}
	if !v.ServesTemplate("file:///docs/{name}") || v.ServesTemplate("file:///x/{y}") {
		t.Error("ServesTemplate is wrong")
	}
	rres, err := cs.ListResources(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rs := v.Resources(rres.Resources); len(rs) != 1 || rs[0].URI != "file:///handbook" || rs[0].Name != "Handbook" {
		t.Errorf("Resources = %+v", rs)
	}
	tres, err := cs.ListResourceTemplates(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if ts := v.Templates(tres.ResourceTemplates); len(ts) != 1 || ts[0].Name != "docs" {
		t.Errorf("Templates = %+v", ts)
	}
}

// TestViewListChanged shows that a change of a source notifies the
// clients of the servers whose view it changes, and only those.
func TestViewListChanged(t *testing.T) {
	extra := rawTool("gh_new", `{"type":"object"}`)
	tests := []struct {
		name   string
		change func(c *Catalog) error
		want   []string // the servers notified
	}{
		{name: "a new upstream tool", change: func(c *Catalog) error {
			_, err := c.SetSource("upstream gh", ghSet(extra))
			return err
		}, want: []string{"root", "gh all"}},
		{name: "the same list again", change: func(c *Catalog) error {
			_, err := c.SetSource("upstream gh", ghSet())
			return err
		}, want: []string{"root"}},
		{name: "a changed tool one view has", change: func(c *Catalog) error {
			set := ghSet()
			set.Tools[1].Tool = &sdk.Tool{Name: "gh_delete", Description: "now described", InputSchema: json.RawMessage(`{"type":"object"}`)}
			_, err := c.SetSource("upstream gh", set)
			return err
		}, want: []string{"root", "gh all"}},
		{name: "the upstream gone", change: func(c *Catalog) error {
			c.RemoveSource("upstream gh")
			return nil
		}, want: []string{"root", "gh all", "gh search"}},
		{name: "another source", change: func(c *Catalog) error {
			_, err := c.SetSource("upstream other", Set{Origin: "other", Tools: []SetTool{rawTool("other_x", `{"type":"object"}`)}})
			return err
		}, want: []string{"root"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := viewCatalog(t)
				servers := map[string]*atomic.Int32{}
				_, _, servers["root"] = viewServer(t, c, nil)
				_, _, servers["core"] = viewServer(t, c, &curation.Exposure{Tools: []curation.ToolSelection{{Source: "core"}}})
				_, _, servers["gh all"] = viewServer(t, c, &curation.Exposure{Tools: []curation.ToolSelection{{Source: "gh"}}})
				_, _, servers["gh search"] = viewServer(t, c, &curation.Exposure{Tools: []curation.ToolSelection{{Source: "gh", Name: "search", ExposeAs: "find"}}})
				time.Sleep(time.Second) // any notification of the start is sent
				synctest.Wait()
				for _, n := range servers {
					n.Store(0)
				}
				if err := tt.change(c); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Second) // past the SDK's notification delay
				synctest.Wait()
				var got []string
				for name, n := range servers {
					if n.Load() > 0 {
						got = append(got, name)
					}
				}
				slices.Sort(got)
				want := slices.Sorted(slices.Values(tt.want))
				if !reflect.DeepEqual(got, want) {
					t.Errorf("notified = %q, want %q", got, want)
				}
			})
		})
	}
}

func TestCheckExposure(t *testing.T) {
	c := viewCatalog(t)
	tests := []struct {
		name string
		view curation.Exposure
		want []string // keys, warnings with a trailing "!"
	}{
		{name: "a good view", view: curation.Exposure{
			Tools: []curation.ToolSelection{
				{Source: "core"},
				{Source: "gh", Name: "search", ExposeAs: "find", FixedArguments: map[string]json.RawMessage{"org": json.RawMessage(`"acme"`)}},
				{Source: "program", Name: "invoice", Description: "Bills."},
				{Source: "jira"},
			},
			Resources: []curation.ResourceSelection{{Source: "declared"}, {Source: "gh", URI: "gh://readme", ExposeAs: "README"}},
			Prompts:   []curation.PromptSelection{{Source: "declared", Name: "greet", ExposeAs: "hello"}},
		}},
		{name: "sources the catalog does not have match nothing", view: curation.Exposure{
			Tools:     []curation.ToolSelection{{Source: "cor"}},
			Resources: []curation.ResourceSelection{{Source: "nope"}},
			Prompts:   []curation.PromptSelection{{Source: "nope"}},
		}, want: []string{"tools[0].name", "resources[0].uri", "prompts[0].name"}},
		{name: "selections that match nothing", view: curation.Exposure{
			Tools:     []curation.ToolSelection{{Source: "core", Name: "ech"}, {Source: "core", Name: "x*"}, {Source: "gh", Name: "create"}, {Source: "gh", Name: "x*"}, {Source: "jira", Name: "get"}},
			Resources: []curation.ResourceSelection{{Source: "declared", URI: "file:///nope"}},
			Prompts:   []curation.PromptSelection{{Source: "gh", Name: "nope"}, {Source: "declared", Name: "x*"}},
		}, want: []string{"tools[0].name", "tools[1].name", "tools[2].name!", "tools[3].name!", "tools[4].name!", "resources[0].uri", "prompts[0].name!", "prompts[1].name"}},
		{name: "curation the schema refuses", view: curation.Exposure{Tools: []curation.ToolSelection{
			{Source: "gh", Name: "search", FixedArguments: map[string]json.RawMessage{"org": json.RawMessage(`"gamma"`), "zone": json.RawMessage(`1`)}},
			{Source: "core", Name: "echo", Arguments: map[string]curation.Argument{"text": {Default: json.RawMessage(`3`)}, "Text": {Description: "no"}}},
			{Source: "core", Name: "calculator", FixedArguments: map[string]json.RawMessage{"a": json.RawMessage(`2`)}},
		}}, want: []string{"tools[0].fixed_arguments.org", "tools[0].fixed_arguments.zone", "tools[1].arguments.Text", "tools[1].arguments.text.default"}},
		{name: "two tools under one name", view: curation.Exposure{Tools: []curation.ToolSelection{
			{Source: "core", Name: "echo", ExposeAs: "say"},
			{Source: "gh", Name: "search", ExposeAs: "say"},
			{Source: "workshop"},
			{Source: "core", Name: "echo", ExposeAs: "say"},
			{Source: "gh", Name: "delete", ExposeAs: "calculator"},
		}}, want: []string{"tools[4].expose_as!", "tools[1].expose_as", "tools[3].expose_as", "tools[2].name"}},
		{name: "a tool under another's root name", view: curation.Exposure{Tools: []curation.ToolSelection{
			{Source: "core", Name: "echo", ExposeAs: "echo_old"},
			{Source: "gh", Name: "search", ExposeAs: "echo"},
		}}, want: []string{"tools[1].expose_as"}},
		{name: "a renamed tool that binds headers", view: curation.Exposure{Tools: []curation.ToolSelection{{Source: "gh", Name: "delete", ExposeAs: "remove"}}},
			want: []string{"tools[0].expose_as!"}},
		{name: "two prompts, two resources under one name", view: curation.Exposure{
			Prompts:   []curation.PromptSelection{{Source: "declared", Name: "greet", ExposeAs: "hi"}, {Source: "gh", Name: "review", ExposeAs: "hi"}},
			Resources: []curation.ResourceSelection{{Source: "declared", URI: "file:///handbook", Title: "a"}, {Source: "declared", URI: "file:///handbook", Title: "b"}},
		}, want: []string{"resources[1].name", "prompts[1].expose_as"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := c.CheckExposure(tt.view, []string{"gh", "jira"})
			var got []string
			for _, p := range ps {
				k := p.Key
				if p.Warning {
					k += "!"
				}
				got = append(got, k)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("CheckExposure keys = %q, want %q\n%s", got, tt.want, problemsText(ps))
			}
		})
	}
}

// A selection of what a fixed source (declared HTTP tools) lacks is an
// error, not an upstream's warning: its tools do not change while serving.
func TestCheckExposureFixedSource(t *testing.T) {
	c := viewCatalog(t)
	if _, err := c.SetSource("http_api orders", Set{Origin: "orders", Prefix: "orders", Fixed: true,
		Tools: []SetTool{rawTool("orders_get", `{"type":"object"}`)}}); err != nil {
		t.Fatal(err)
	}
	ps := c.CheckExposure(curation.Exposure{Tools: []curation.ToolSelection{
		{Source: "orders", Name: "get"}, {Source: "orders", Name: "nope"}, {Source: "orders", Name: "x*"}, {Source: "gh", Name: "nope"},
	}}, []string{"gh"})
	var got []string
	for _, p := range ps {
		k := p.Key
		if p.Warning {
			k += "!"
		}
		got = append(got, k)
	}
	if want := []string{"tools[1].name", "tools[2].name", "tools[3].name!"}; !reflect.DeepEqual(got, want) {
		t.Errorf("CheckExposure keys = %q, want %q\n%s", got, want, problemsText(ps))
	}
}

func problemsText(ps []curation.Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Error())
		b.WriteByte('\n')
	}
	return b.String()
}

func TestCheckExposureMessages(t *testing.T) {
	c := viewCatalog(t)
	ps := c.CheckExposure(curation.Exposure{Tools: []curation.ToolSelection{
		{Source: "core", Name: "ech"},
		{Source: "cor"},
		{Source: "gh", Name: "search", FixedArguments: map[string]json.RawMessage{"org": json.RawMessage(`"gamma"`)}},
		{Source: "core", Name: "echo", ExposeAs: "say"},
		{Source: "workshop", Name: "weather", ExposeAs: "say"},
	}}, nil)
	want := []string{
		`tools[0].name: source "core" has no tool "ech" (did you mean "echo"?)`,
		`tools[1].name: there is no tool of source "cor"`,
		`tools[2].fixed_arguments.org: the argument's schema refuses the value "gamma"`,
		`tools[4].expose_as: tool "weather" would be exposed as "say", the name tools[3] gives tool "echo"`,
	}
	if len(ps) != len(want) {
		t.Fatalf("CheckExposure =\n%s\nwant %d problems", problemsText(ps), len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(ps[i].Error(), w) {
			t.Errorf("problem %d = %q\nwant it to start %q", i, ps[i].Error(), w)
		}
	}
}

// TestInferredInput shows that the input schema the catalog infers for a
// typed tool is the one the SDK serves, which curation is checked
// against.
func TestInferredInput(t *testing.T) {
	type in struct {
		City  string   `json:"city" jsonschema:"the city"`
		Days  *int     `json:"days,omitempty"`
		Flags []string `json:"flags"`
	}
	tools := []Tool{
		NewTool(&sdk.Tool{Name: "struct"}, noop[in]),
		NewTool(&sdk.Tool{Name: "pointer"}, noop[*in]),
		NewTool(&sdk.Tool{Name: "any"}, noop[any]),
		NewTool(&sdk.Tool{Name: "map"}, noop[map[string]int]),
		NewTool(&sdk.Tool{Name: "given", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{}}}`)}, noop[any]),
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	for _, tl := range tools {
		tl.Add(s)
	}
	st, ct := sdk.NewInMemoryTransports()
	ss, err := s.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	served := map[string]any{}
	for _, tl := range listed(t, cs) {
		served[tl.Name] = tl.InputSchema
	}
	for _, tl := range tools {
		schema, err := tl.input()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(schema)
		if !sameJSON(t, served[tl.Name], string(b)) {
			t.Errorf("%s: inferred %s, the SDK serves %v", tl.Name, b, served[tl.Name])
		}
	}
}
