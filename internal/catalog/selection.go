package catalog

import (
	"cmp"
	"maps"
	"slices"

	"github.com/portcullis-mcp/portcullis/internal/curation"
)

// What a view selects: the catalog's items as candidates, matched
// against an exposure's selectors, first match wins, with the clashes of
// two items exposed under one name.

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

func resourceCuration(sel *curation.ResourceSelection, single bool) *curation.ResourceSelection {
	if single && sel.Curated() {
		return sel
	}
	return nil
}
