package catalog

import (
	"encoding/json"
	"slices"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/portcullis-mcp/portcullis/internal/curation"
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

// server returns the SDK server v registers on.
func (v *ServerView) server() *sdk.Server { return v.s }

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
