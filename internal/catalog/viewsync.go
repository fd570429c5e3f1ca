package catalog

import (
	"maps"
	"reflect"
	"slices"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/internal/curation"
	"github.com/portcullis-mcp/portcullis/internal/mcpapps"
	"github.com/yosida95/uritemplate/v3"
)

// Keeping a view's server in step with its exposure: what is selected is
// registered (under original names), what is no longer is removed, and
// the exposed names are rebuilt, whenever a source or the catalog changes.

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
