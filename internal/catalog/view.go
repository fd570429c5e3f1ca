package catalog

import (
	"cmp"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/portcullis-mcp/portcullis/internal/curation"
	"github.com/portcullis-mcp/portcullis/internal/mcpapps"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// Server views. A virtual server serves part of the catalog, chosen and
// curated by a [curation.Exposure]. [Catalog.RegisterView] adds to its
// SDK server the tools, resources, templates and prompts the exposure
// selects, under their original names (the names the root server lists
// them by), and keeps the server up to date as sources change: a change
// outside the exposure changes nothing on the server, so its clients get
// no list_changed notification. The names the server's callers see (the
// exposed names) are the [ServerView]'s business: the server's
// middleware (package mcp) rewrites its lists and maps each call's
// exposed name to the original through it.

// ServerView is the part of a catalog that one server serves, as a
// [curation.Exposure] selects and curates it, kept up to date as sources
// change (see [Catalog.RegisterView]). Its methods take and return the
// names the server's callers see, and are safe for concurrent use.
type ServerView struct {
	c   *Catalog
	sel curation.Exposure
	s   *sdk.Server
	cur atomic.Pointer[viewState]

	// What is registered on s, keyed by original name (URI for resources,
	// URI template for templates). Guarded by c.mu.
	regTools     map[string]item[toolReg]
	regResources map[string]item[SetResource]
	regTemplates map[string]item[SetTemplate]
	regPrompts   map[string]item[SetPrompt]
}

// ViewTool is a tool as a view exposes it.
type ViewTool struct {
	// Name is the name callers see and call the tool by.
	Name string
	// Original is the name the root server lists it by, and the server
	// of the view registers it under.
	Original string

	sel    *curation.ToolSelection // nil: exposed as it is
	call   *curation.Call          // nil: arguments pass as they are
	listed atomic.Pointer[listedTool]
}

// listedTool caches a tool as listed (from) and curated (to).
type listedTool struct{ from, to *sdk.Tool }

// Arguments returns the arguments a call with args reaches the tool
// with: its fixed arguments set, and its defaults for arguments args
// leaves out (see [curation.Call.Arguments]). A call that names a fixed
// argument is an error wrapping [curation.ErrFixedArgument].
func (t *ViewTool) Arguments(args json.RawMessage) (json.RawMessage, error) {
	return t.call.Arguments(args)
}

// Curated reports whether the tool is listed or called any differently
// from the original.
func (t *ViewTool) Curated() bool { return t.sel != nil }

// curated returns the tool from, as listed by the server, as the view's
// callers see it.
func (t *ViewTool) curated(from *sdk.Tool) (*sdk.Tool, error) {
	if t.sel == nil {
		return from, nil
	}
	if l := t.listed.Load(); l != nil && l.from == from {
		return l.to, nil
	}
	to, err := curation.Tool(from, t.sel)
	if err != nil {
		return nil, err
	}
	t.listed.Store(&listedTool{from: from, to: to})
	return to, nil
}

// viewPrompt is a prompt as a view exposes it.
type viewPrompt struct {
	name, original string
	sel            *curation.PromptSelection // nil: exposed as it is
}

// viewState is what a view exposes at one time. It is replaced whole
// when a source changes.
type viewState struct {
	tools      map[string]*ViewTool   // by exposed name
	toolsOf    map[string][]*ViewTool // by original name
	toolNames  []string               // exposed, sorted
	knownTools map[string]bool        // every tool of the catalog, by original name

	prompts      map[string]*viewPrompt
	promptsOf    map[string][]*viewPrompt
	knownPrompts map[string]bool

	// appNames maps the name a tool has in a source that serves MCP
	// Apps to the names the view exposes the tools of that name by
	// (see [ServerView.AppTool]), and appURIs the URI a ui:// resource
	// has there to the URIs of those the view serves
	// ([ServerView.AppResource]).
	appNames, appURIs appIndex

	// resources and templates map the URIs (URI templates) exposed to
	// their curation, nil for none.
	resources    map[string]*curation.ResourceSelection
	templates    map[string]*curation.ResourceSelection
	templateExps []*uritemplate.Template

	clashes map[string]bool // logged already
}

// RegisterView adds to s what the exposure e selects of c, and keeps s
// up to date with the sources from now on (see [Catalog.SetSource]): only
// changes to what e selects change s. Items are registered under their
// original names; the returned [ServerView] knows the names s's callers
// see, and package mcp's middleware serves them. Register items before
// building servers, as for [Catalog.Register].
//
// Two items e would expose under one name are not both exposed:
// a selection naming one item wins over a pattern, and the earlier
// selection over the later ([Catalog.CheckExposure] reports them). An item
// whose definition a source sends again unchanged keeps the handler it
// was registered with.
func (c *Catalog) RegisterView(s *sdk.Server, e curation.Exposure) *ServerView {
	v := &ServerView{
		c: c, sel: e, s: s,
		regTools:     map[string]item[toolReg]{},
		regResources: map[string]item[SetResource]{},
		regTemplates: map[string]item[SetTemplate]{},
		regPrompts:   map[string]item[SetPrompt]{},
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.views = append(c.views, v)
	v.refresh()
	return v
}

// candidate is something a view may select.
type candidate struct {
	// name is the item's name as the root server lists it: the tool or
	// prompt name, the resource URI, the template's URI template.
	name string
	// local is its name in its source, which selections match: name
	// without an upstream's prefix.
	local   string
	sources []string
}

// item is a candidate with what registers it on a server.
type item[T any] struct {
	candidate
	own bool // the catalog's own, which never changes
	reg T
}

// toolReg registers a tool: the catalog's own, or a source's.
type toolReg struct {
	own *Tool
	set SetTool
	// app is whether its source serves MCP Apps.
	app bool
}

// catalogItems is every item of the catalog, in a stable order.
type catalogItems struct {
	tools     []item[toolReg]
	resources []item[SetResource]
	templates []item[SetTemplate]
	prompts   []item[SetPrompt]
}

// items returns what c holds now. c.mu is held.
func (c *Catalog) items() catalogItems {
	var it catalogItems
	for i := range c.tools {
		t := &c.tools[i]
		it.tools = append(it.tools, item[toolReg]{candidate{t.Name, t.Name, t.sources}, true, toolReg{own: t}})
	}
	for _, r := range c.resources {
		it.resources = append(it.resources, item[SetResource]{candidate{r.r.URI, r.r.URI, []string{r.source}}, true, SetResource{r.r, r.h}})
	}
	for _, t := range c.templates {
		it.templates = append(it.templates, item[SetTemplate]{candidate{t.t.URITemplate, t.t.URITemplate, []string{t.source}}, true, SetTemplate{t.t, t.h}})
	}
	for _, p := range c.prompts {
		it.prompts = append(it.prompts, item[SetPrompt]{candidate{p.p.Name, p.p.Name, []string{p.source}}, true, SetPrompt{p.p, p.h}})
	}
	for _, key := range slices.Sorted(maps.Keys(c.sources)) {
		src := c.sources[key]
		from := []string{src.origin}
		for _, n := range slices.Sorted(maps.Keys(src.tools)) {
			it.tools = append(it.tools, item[toolReg]{candidate{n, src.local(n), from}, false, toolReg{set: src.tools[n], app: src.apps}})
		}
		for _, u := range slices.Sorted(maps.Keys(src.resources)) {
			it.resources = append(it.resources, item[SetResource]{candidate{u, u, from}, false, src.resources[u]})
		}
		for _, u := range slices.Sorted(maps.Keys(src.templates)) {
			it.templates = append(it.templates, item[SetTemplate]{candidate{u, u, from}, false, src.templates[u]})
		}
		for _, n := range slices.Sorted(maps.Keys(src.prompts)) {
			it.prompts = append(it.prompts, item[SetPrompt]{candidate{n, src.local(n), from}, false, src.prompts[n]})
		}
	}
	return it
}

// local returns the name of the source's tool or prompt name without
// the source's prefix.
func (src *source) local(name string) string {
	if src.prefix == "" {
		return name
	}
	return strings.TrimPrefix(name, src.prefix+"_")
}

func candidates[T any](items []item[T]) []candidate {
	out := make([]candidate, len(items))
	for i, it := range items {
		out[i] = it.candidate
	}
	return out
}

// selector is what resolve needs of a selection of any kind.
type selector struct {
	source, pattern, exposeAs string
	single                    bool
}

// pick is an item a view exposes: the candidate, under a name, by a
// selection.
type pick struct {
	exposed string
	item    int
	sel     int
	single  bool
}

// clash is a pick left out: first exposes another item (or the same one
// by another single selection) under its name.
type clash struct {
	pick
	first pick
}

// resolve returns what sels expose of cands: each single selection's
// matches under their exposed names, then each pattern's matches that no
// single selection names, under their own; a name taken by an earlier
// pick is a clash, except for an item a pattern selects again.
func resolve(sels []selector, cands []candidate) (picks []pick, clashes []clash) {
	claimed := map[int]bool{}
	var all []pick
	for si, s := range sels {
		if !s.single {
			continue
		}
		for ci, c := range cands {
			if c.local == s.pattern && slices.Contains(c.sources, s.source) {
				all = append(all, pick{cmp.Or(s.exposeAs, c.name), ci, si, true})
				claimed[ci] = true
			}
		}
	}
	for si, s := range sels {
		if s.single {
			continue
		}
		for ci, c := range cands {
			if !claimed[ci] && slices.Contains(c.sources, s.source) && curation.Match(s.pattern, c.local) {
				all = append(all, pick{c.name, ci, si, false})
			}
		}
	}
	seen := map[string]pick{}
	for _, p := range all {
		if first, dup := seen[p.exposed]; dup {
			if first.item != p.item || (first.single && p.single) {
				clashes = append(clashes, clash{p, first})
			}
			continue
		}
		seen[p.exposed] = p
		picks = append(picks, p)
	}
	return picks, clashes
}

func toolSelectors(e *curation.Exposure) []selector {
	out := make([]selector, len(e.Tools))
	for i, s := range e.Tools {
		out[i] = selector{s.Source, s.Name, s.ExposeAs, s.Single()}
	}
	return out
}

func resourceSelectors(e *curation.Exposure) []selector {
	out := make([]selector, len(e.Resources))
	for i, s := range e.Resources {
		out[i] = selector{source: s.Source, pattern: s.URI, single: s.Single()}
	}
	return out
}

func promptSelectors(e *curation.Exposure) []selector {
	out := make([]selector, len(e.Prompts))
	for i, s := range e.Prompts {
		out[i] = selector{s.Source, s.Name, s.ExposeAs, s.Single()}
	}
	return out
}

// refresh makes s serve what the view selects of the catalog now. c.mu
// is held.
func (v *ServerView) refresh() {
	it := v.c.items()
	prev := v.cur.Load()
	st := &viewState{
		tools: map[string]*ViewTool{}, toolsOf: map[string][]*ViewTool{}, knownTools: map[string]bool{},
		prompts: map[string]*viewPrompt{}, promptsOf: map[string][]*viewPrompt{}, knownPrompts: map[string]bool{},
		resources: map[string]*curation.ResourceSelection{}, templates: map[string]*curation.ResourceSelection{},
		clashes: map[string]bool{},
	}
	wantTools := map[string]item[toolReg]{}
	picks, clashes := resolve(toolSelectors(&v.sel), candidates(it.tools))
	for _, p := range picks {
		in := it.tools[p.item]
		t := &ViewTool{Name: p.exposed, Original: in.name}
		if sel := &v.sel.Tools[p.sel]; p.single && sel.Curated() {
			call, err := curation.NewCall(sel)
			if err != nil {
				v.c.logger.Error("catalog: view: a tool is left out: its curation is wrong", "tool", in.name, "error", err)
				continue
			}
			t.sel, t.call = sel, call
		}
		st.tools[t.Name] = t
		st.toolsOf[t.Original] = append(st.toolsOf[t.Original], t)
		wantTools[in.name] = in
	}
	appURIs := v.withApps(it, st, wantTools)
	for _, in := range it.tools {
		st.knownTools[in.name] = true
	}
	st.toolNames = slices.Sorted(maps.Keys(st.tools))
	v.logClashes(prev, st, "tool", clashes, candidates(it.tools))
	for _, t := range st.tools {
		in := wantTools[t.Original]
		if in.reg.app && !v.listed(st, in.local) && !bindsHeaders(in.reg.set.Tool.InputSchema) {
			if st.appNames == nil {
				st.appNames = appIndex{}
			}
			st.appNames[in.local] = append(st.appNames[in.local], t.Name)
		}
	}
	for _, names := range st.appNames {
		slices.Sort(names)
	}

	wantPrompts := map[string]item[SetPrompt]{}
	picks, clashes = resolve(promptSelectors(&v.sel), candidates(it.prompts))
	for _, p := range picks {
		in := it.prompts[p.item]
		vp := &viewPrompt{name: p.exposed, original: in.name}
		if sel := &v.sel.Prompts[p.sel]; p.single && sel.Curated() {
			vp.sel = sel
		}
		st.prompts[vp.name] = vp
		st.promptsOf[vp.original] = append(st.promptsOf[vp.original], vp)
		wantPrompts[in.name] = in
	}
	for _, in := range it.prompts {
		st.knownPrompts[in.name] = true
	}
	v.logClashes(prev, st, "prompt", clashes, candidates(it.prompts))

	wantResources := map[string]item[SetResource]{}
	picks, clashes = resolve(resourceSelectors(&v.sel), candidates(it.resources))
	for _, p := range picks {
		in := it.resources[p.item]
		st.resources[in.name] = resourceCuration(&v.sel.Resources[p.sel], p.single)
		wantResources[in.name] = in
	}
	for _, in := range it.resources {
		if _, ok := wantResources[in.name]; !ok && appURIs[in.name] {
			st.resources[in.name] = nil
			wantResources[in.name] = in
		}
	}
	v.logClashes(prev, st, "resource", clashes, candidates(it.resources))
	served := func(uri string) bool { _, ok := st.resources[uri]; return ok }
	st.appURIs = v.c.appURIIndex(served, served)
	wantTemplates := map[string]item[SetTemplate]{}
	picks, clashes = resolve(resourceSelectors(&v.sel), candidates(it.templates))
	for _, p := range picks {
		in := it.templates[p.item]
		st.templates[in.name] = resourceCuration(&v.sel.Resources[p.sel], p.single)
		if exp, err := uritemplate.New(in.name); err == nil {
			st.templateExps = append(st.templateExps, exp)
		}
		wantTemplates[in.name] = in
	}
	v.logClashes(prev, st, "resource template", clashes, candidates(it.templates))

	// Callers lose what goes before it leaves the server, and gain what
	// comes after it is there.
	v.cur.Store(st)
	s := v.s
	syncServer(v.regTools, wantTools, s.RemoveTools, func(t item[toolReg]) {
		if t.reg.own != nil {
			t.reg.own.Add(s)
		} else {
			s.AddTool(t.reg.set.Tool, t.reg.set.Handler)
		}
	}, func(a, b toolReg) bool { return reflect.DeepEqual(a.set.Tool, b.set.Tool) })
	syncServer(v.regResources, wantResources, s.RemoveResources, func(r item[SetResource]) { s.AddResource(r.reg.Resource, r.reg.Handler) },
		func(a, b SetResource) bool { return reflect.DeepEqual(a.Resource, b.Resource) })
	syncServer(v.regTemplates, wantTemplates, s.RemoveResourceTemplates, func(t item[SetTemplate]) { s.AddResourceTemplate(t.reg.Template, t.reg.Handler) },
		func(a, b SetTemplate) bool { return reflect.DeepEqual(a.Template, b.Template) })
	syncServer(v.regPrompts, wantPrompts, s.RemovePrompts, func(p item[SetPrompt]) { s.AddPrompt(p.reg.Prompt, p.reg.Handler) },
		func(a, b SetPrompt) bool { return reflect.DeepEqual(a.Prompt, b.Prompt) })
	v.regTools, v.regResources, v.regTemplates, v.regPrompts = wantTools, wantResources, wantTemplates, wantPrompts
}

// withApps adds to st the app-only tools of the Apps whose tools st
// exposes (a tool that names its App in _meta.ui.resourceUri): the
// tools of the same source that only Apps call
// (_meta.ui.visibility ["app"]), under the names the root server has them
// by, unless st exposes another tool by that name. It returns the App
// resources those tools name (_meta.ui.resourceUri), which the view
// serves with them. st's tools are exposed under wantTools; c.mu is held.
func (v *ServerView) withApps(it catalogItems, st *viewState, wantTools map[string]item[toolReg]) map[string]bool {
	var uris, sources map[string]bool
	for _, in := range wantTools {
		if !in.reg.app {
			continue
		}
		u := mcpapps.ResourceURI(in.reg.set.Tool.Meta)
		if u == "" {
			continue
		}
		if sources == nil {
			uris, sources = map[string]bool{}, map[string]bool{}
		}
		sources[in.sources[0]] = true
		uris[u] = true
	}
	for _, in := range it.tools {
		if !in.reg.app || !sources[in.sources[0]] || !mcpapps.AppOnly(in.reg.set.Tool.Meta) {
			continue
		}
		if _, ok := wantTools[in.name]; ok {
			continue
		}
		if _, taken := st.tools[in.name]; taken {
			continue
		}
		t := &ViewTool{Name: in.name, Original: in.name}
		st.tools[t.Name] = t
		st.toolsOf[t.Original] = append(st.toolsOf[t.Original], t)
		wantTools[in.name] = in
		if u := mcpapps.ResourceURI(in.reg.set.Tool.Meta); u != "" {
			uris[u] = true
		}
	}
	return uris
}

// syncServer changes what a server has registered from had to want: remove
// takes away what want lacks, in one call (one notification), and add
// registers what want adds or changes. The catalog's own items never
// change; a source's changes when same says so.
func syncServer[T any](had, want map[string]item[T], remove func(...string), add func(item[T]), same func(a, b T) bool) {
	var gone []string
	for k := range had {
		if _, ok := want[k]; !ok {
			gone = append(gone, k)
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		remove(gone...)
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		w := want[k]
		if h, ok := had[k]; ok && h.own == w.own && (w.own || same(h.reg, w.reg)) {
			continue
		}
		add(w)
	}
}

func resourceCuration(sel *curation.ResourceSelection, single bool) *curation.ResourceSelection {
	if single && sel.Curated() {
		return sel
	}
	return nil
}

// logClashes logs the clashes st has that prev had not.
func (v *ServerView) logClashes(prev, st *viewState, kind string, clashes []clash, cands []candidate) {
	for _, c := range clashes {
		key := kind + " " + cands[c.item].name + " " + c.exposed
		st.clashes[key] = true
		if prev != nil && prev.clashes[key] {
			continue
		}
		v.c.logger.Warn("catalog: view: left out: its name is taken", "kind", kind, "name", cands[c.item].name,
			"exposed_as", c.exposed, "taken_by", cands[c.first.item].name)
	}
}

// Tool returns the tool callers call by name, if the view exposes one.
func (v *ServerView) Tool(name string) (*ViewTool, bool) {
	t, ok := v.cur.Load().tools[name]
	return t, ok
}

// AppTool returns the names the view exposes the tools by that a source
// serving MCP Apps names name itself (see [Catalog.AppTool]), sorted; nil
// for none, and for a name the view exposes a tool by. It is one map
// lookup.
func (v *ServerView) AppTool(name string) []string {
	return v.cur.Load().appNames[name]
}

// AppResource returns the URIs of the resources the view serves that a
// source serving MCP Apps gives uri itself (see [Catalog.AppResource]),
// sorted; nil for none. It is one map lookup.
func (v *ServerView) AppResource(uri string) []string {
	return v.cur.Load().appURIs[uri]
}

// HasTool reports whether the server has a tool callers call by name:
// one the view exposes, or one added to the server while it serves (see
// [AddRunningTool]). A tool the view leaves out, or exposes under another
// name, it does not have.
func (v *ServerView) HasTool(name string) bool {
	st := v.cur.Load()
	if _, ok := st.tools[name]; ok {
		return true
	}
	return !st.knownTools[name] && v.running(name)
}

// listed reports whether callers call a tool of the server by name, as
// HasTool does, in st. v.c.mu is held.
func (v *ServerView) listed(st *viewState, name string) bool {
	if _, ok := st.tools[name]; ok {
		return true
	}
	return !st.knownTools[name] && v.c.runningOn[v.s][name]
}

func (v *ServerView) running(name string) bool {
	v.c.mu.RLock()
	defer v.c.mu.RUnlock()
	return v.c.runningOn[v.s][name]
}

// ToolNames returns the names callers call the server's tools by, sorted,
// as [ServerView.HasTool] knows them.
func (v *ServerView) ToolNames() []string {
	st := v.cur.Load()
	names := slices.Clone(st.toolNames)
	v.c.mu.RLock()
	for n := range v.c.runningOn[v.s] {
		if !st.knownTools[n] && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	v.c.mu.RUnlock()
	slices.Sort(names)
	return names
}

// Original returns the name the root server lists the tool callers call
// name by; name itself for a name the view does not map.
func (v *ServerView) Original(name string) string {
	if t, ok := v.Tool(name); ok {
		return t.Original
	}
	return name
}

// ToolFacts returns what a policy may ask of the tool callers call name
// (see [Catalog.ToolFacts]): the upstream that offers it, and its
// annotations as the view exposes them (its curation's hints over the
// tool's own). ok is false when the server has no such tool.
func (v *ServerView) ToolFacts(name string) (upstream string, annotations *sdk.ToolAnnotations, ok bool) {
	t, exposed := v.Tool(name)
	if !exposed {
		if !v.HasTool(name) {
			return "", nil, false
		}
		return v.c.ToolFacts(name)
	}
	upstream, annotations, ok = v.c.ToolFacts(t.Original)
	if t.sel == nil || !t.sel.Annotations.Set() {
		return upstream, annotations, ok
	}
	var a sdk.ToolAnnotations
	if annotations != nil {
		a = *annotations
	}
	if h := t.sel.Annotations.ReadOnlyHint; h != nil {
		a.ReadOnlyHint = *h
	}
	if h := t.sel.Annotations.DestructiveHint; h != nil {
		a.DestructiveHint = h
	}
	if h := t.sel.Annotations.IdempotentHint; h != nil {
		a.IdempotentHint = *h
	}
	if h := t.sel.Annotations.OpenWorldHint; h != nil {
		a.OpenWorldHint = h
	}
	return upstream, &a, ok
}

// TaskSupport returns how calls of the tool callers call name may run as
// tasks (see [Catalog.TaskSupport]).
func (v *ServerView) TaskSupport(name string) tasks.ToolTasks {
	if t, ok := v.Tool(name); ok {
		return v.c.TaskSupport(t.Original)
	}
	if v.HasTool(name) {
		return v.c.TaskSupport(name)
	}
	return tasks.ToolTasks{}
}

// Direct returns the direct handler of the tool callers call name (see
// [Catalog.Direct]), or nil.
func (v *ServerView) Direct(name string) DirectHandler {
	if t, ok := v.Tool(name); ok {
		return v.c.Direct(t.Original)
	}
	return nil
}

// Tools returns a page of the server's tools/list (tools under their
// original names) as callers see it: each tool the view exposes once per
// name it exposes it under, curated; a tool added while the server serves
// as it is; nothing else. A tool whose curation fails (its input schema
// is not a JSON object) is left out and logged.
func (v *ServerView) Tools(page []*sdk.Tool) []*sdk.Tool {
	st := v.cur.Load()
	out := make([]*sdk.Tool, 0, len(page))
	for _, t := range page {
		exposed, ok := st.toolsOf[t.Name]
		if !ok {
			if !st.knownTools[t.Name] {
				out = append(out, t)
			}
			continue
		}
		for _, e := range exposed {
			ct, err := e.curated(t)
			if err != nil {
				v.c.logger.Error("catalog: view: a tool is left out of the list: it cannot be curated", "tool", t.Name, "error", err)
				continue
			}
			out = append(out, ct)
		}
	}
	return out
}

// Prompt returns the name the server has the prompt callers get as name
// under, and whether callers may get it: false for a prompt of the
// catalog the view leaves out or exposes under another name.
func (v *ServerView) Prompt(name string) (original string, ok bool) {
	st := v.cur.Load()
	if p, ok := st.prompts[name]; ok {
		return p.original, true
	}
	return name, !st.knownPrompts[name]
}

// Prompts returns a page of the server's prompts/list as callers see it,
// as [ServerView.Tools] does.
func (v *ServerView) Prompts(page []*sdk.Prompt) []*sdk.Prompt {
	st := v.cur.Load()
	out := make([]*sdk.Prompt, 0, len(page))
	for _, p := range page {
		exposed, ok := st.promptsOf[p.Name]
		if !ok {
			if !st.knownPrompts[p.Name] {
				out = append(out, p)
			}
			continue
		}
		for _, e := range exposed {
			if e.sel == nil {
				out = append(out, p)
				continue
			}
			cp := curation.Prompt(p, e.sel)
			cp.Name = e.name
			out = append(out, cp)
		}
	}
	return out
}

// Resources returns a page of the server's resources/list as callers see
// it: the resources the view exposes, curated.
func (v *ServerView) Resources(page []*sdk.Resource) []*sdk.Resource {
	st := v.cur.Load()
	out := make([]*sdk.Resource, 0, len(page))
	for _, r := range page {
		sel, ok := st.resources[r.URI]
		switch {
		case !ok:
		case sel == nil:
			out = append(out, r)
		default:
			out = append(out, curation.Resource(r, sel))
		}
	}
	return out
}

// Templates returns a page of the server's resources/templates/list as
// callers see it, as [ServerView.Resources] does.
func (v *ServerView) Templates(page []*sdk.ResourceTemplate) []*sdk.ResourceTemplate {
	st := v.cur.Load()
	out := make([]*sdk.ResourceTemplate, 0, len(page))
	for _, t := range page {
		sel, ok := st.templates[t.URITemplate]
		switch {
		case !ok:
		case sel == nil:
			out = append(out, t)
		default:
			out = append(out, curation.Template(t, sel))
		}
	}
	return out
}

// ServesResource reports whether callers may read (and subscribe to) the
// resource uri: one the view exposes, or one of a template it exposes.
func (v *ServerView) ServesResource(uri string) bool {
	st := v.cur.Load()
	if _, ok := st.resources[uri]; ok {
		return true
	}
	for _, t := range st.templateExps {
		if t.Regexp().MatchString(uri) {
			return true
		}
	}
	return false
}

// ServesTemplate reports whether the view exposes the resource template
// uriTemplate.
func (v *ServerView) ServesTemplate(uriTemplate string) bool {
	_, ok := v.cur.Load().templates[uriTemplate]
	return ok
}
