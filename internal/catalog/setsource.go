package catalog

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Sources outside the catalog (upstreams) offering what they serve while
// servers run: set, replaced and removed whole, on every server and view.

// SetSource makes set what the source called name offers, on every server
// registered with c (see [Catalog.Register]) and on those registered later,
// and on the servers of views whose exposure selects it (see
// [Catalog.RegisterView]):
// what the source offered before and set lacks is removed, the rest added
// or replaced, and the SDK tells the servers' clients that their lists
// changed. Its tools are catalog tools: [Catalog.HasTool] and
// [Catalog.ToolNames] know them, so the policy gate treats them as any other.
//
// SetSource refuses the whole set, changing nothing, when a tool or prompt
// name appears twice in it or is taken by the catalog's own or another
// source's; the error wraps [ErrClash] and names each clash. Resources and
// templates are named by their URIs, which belong to the server that made
// them and cannot be renamed here: a URI (or URI template) the catalog
// has itself stays the catalog's, and one that several sources offer is
// served by the source [Set.Order] ranks first, whichever was set first.
// skipped lists the set's URIs that another serves, now.
func (c *Catalog) SetSource(name string, set Set) (skipped []string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.clashes(name, set); err != nil {
		return nil, err
	}
	next := newSource(name, set)
	c.replaceSource(name, next)
	return c.skipped(next), nil
}

// RemoveSource removes what the source called name offers from every
// server. It is a no-op for an unknown name.
func (c *Catalog) RemoveSource(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sources[name] == nil {
		return
	}
	c.replaceSource(name, nil)
}

// replaceSource makes next what the source called name offers (nil:
// nothing), and every server and view serve what the sources offer now,
// URIs moving from one source to another included. c.mu is held.
func (c *Catalog) replaceSource(name string, next *source) {
	prev := c.sources[name]
	if prev == nil {
		prev = newSource(name, Set{})
	}
	was := make(map[string]uris, len(c.sources))
	for n, src := range c.sources {
		if n != name {
			was[n] = uris{src.resources, src.templates}
		}
	}
	if next == nil {
		delete(c.sources, name)
		next = newSource(name, Set{})
	} else {
		c.sources[name] = next
	}
	c.assignURIs()
	others := slices.Sorted(maps.Keys(was))
	for _, s := range c.servers {
		// What leaves goes first: a URI that moves from one source to
		// another is removed, then added with its new source's handler.
		removeMissing(s, prev, next)
		for _, n := range others {
			src := c.sources[n]
			if gone := missing(was[n].resources, src.resources); len(gone) > 0 {
				s.RemoveResources(gone...)
			}
			if gone := missing(was[n].templates, src.templates); len(gone) > 0 {
				s.RemoveResourceTemplates(gone...)
			}
		}
		addSource(s, next)
		for _, n := range others {
			src := c.sources[n]
			for _, u := range missing(src.resources, was[n].resources) {
				s.AddResource(src.resources[u].Resource, src.resources[u].Handler)
			}
			for _, u := range missing(src.templates, was[n].templates) {
				s.AddResourceTemplate(src.templates[u].Template, src.templates[u].Handler)
			}
		}
	}
	c.indexApps()
	for _, v := range c.views {
		v.refresh()
	}
}

// assignURIs gives each resource URI and URI template the sources offer
// to the one source that serves it: none when the catalog has it itself,
// else the source ranked first (see [source.before]). c.mu is held.
func (c *Catalog) assignURIs() {
	ranked := slices.SortedFunc(maps.Values(c.sources), func(a, b *source) int {
		if a.before(b) {
			return -1
		}
		if b.before(a) {
			return 1
		}
		return 0
	})
	takenR := map[string]bool{}
	for _, r := range c.resources {
		takenR[r.r.URI] = true
	}
	takenT := map[string]bool{}
	for _, t := range c.templates {
		takenT[t.t.URITemplate] = true
	}
	for _, src := range ranked {
		src.resources = unclaimed(src.offeredResources, takenR)
		src.templates = unclaimed(src.offeredTemplates, takenT)
	}
}

// skipped describes the resources and templates src offers and another
// serves. c.mu is held.
func (c *Catalog) skipped(src *source) []string {
	var out []string
	owner := func(kind, uri string, builtin bool, has func(*source) bool) {
		by := "a built-in " + kind
		if !builtin {
			by = c.sourceOwning(src.name, has)
		}
		out = append(out, fmt.Sprintf("%s %q (already offered by %s)", kind, uri, by))
	}
	for _, u := range missing(src.offeredResources, src.resources) {
		owner("resource", u, slices.ContainsFunc(c.resources, func(x resource) bool { return x.r.URI == u }),
			func(s *source) bool { _, ok := s.resources[u]; return ok })
	}
	for _, u := range missing(src.offeredTemplates, src.templates) {
		owner("resource template", u, slices.ContainsFunc(c.templates, func(x resourceTemplate) bool { return x.t.URITemplate == u }),
			func(s *source) bool { _, ok := s.templates[u]; return ok })
	}
	return out
}

// clashes reports every name of set that is taken. c.mu is held.
func (c *Catalog) clashes(name string, set Set) error {
	var errs []error
	toolOwner := func(n string) string {
		if c.names[n] || c.running[n] {
			return "a built-in tool"
		}
		return c.sourceOwning(name, func(s *source) bool { _, ok := s.tools[n]; return ok })
	}
	seen := map[string]bool{}
	check := func(kind, n string, owner func(string) string) {
		switch {
		case seen[kind+" "+n]:
			errs = append(errs, fmt.Errorf("%w: %s %q is listed twice", ErrClash, kind, n))
		case owner(n) != "":
			errs = append(errs, fmt.Errorf("%w: %s %q is already offered by %s", ErrClash, kind, n, owner(n)))
		}
		seen[kind+" "+n] = true
	}
	for _, t := range set.Tools {
		check("tool", t.Tool.Name, toolOwner)
	}
	for _, p := range set.Prompts {
		check("prompt", p.Prompt.Name, func(n string) string {
			if slices.ContainsFunc(c.prompts, func(x prompt) bool { return x.p.Name == n }) {
				return "a built-in prompt"
			}
			return c.sourceOwning(name, func(s *source) bool { _, ok := s.prompts[n]; return ok })
		})
	}
	return errors.Join(errs...)
}

// sourceOwning names the source other than self for which has is true, or
// returns "".
func (c *Catalog) sourceOwning(self string, has func(*source) bool) string {
	for _, n := range slices.Sorted(maps.Keys(c.sources)) {
		if n != self && has(c.sources[n]) {
			return fmt.Sprintf("source %q", n)
		}
	}
	return ""
}

// ForwardToSources makes [Catalog.Apply] give servers a completion
// handler that also answers for the prompts and resource templates of
// sources whose [Set] has a Complete function, and subscribe handlers that
// pass subscriptions to sources' resources on to them. Call it before
// Apply when sources will be added: the handlers, and the capabilities
// they advertise, are set when a server is built.
func (c *Catalog) ForwardToSources() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forwardToSources = true
}
