package catalog

import (
	"maps"
	"slices"

	"github.com/portcullis-mcp/portcullis/internal/mcpapps"
)

// MCP Apps. An App (io.modelcontextprotocol/ui), shown by the host, calls
// its server's tools by the names its server gave them, which the catalog
// lists under the upstream's prefix, and reads its server's ui://
// resources by their URIs in the upstream, which the catalog lists under
// the prefix too (mcpapps.Served). So that it can, the catalog keeps, for
// every source that serves Apps (see [source.apps]), which tools each of
// its own names stands for, and which resources each of its own ui://
// URIs; the servers' middleware (package mcp) calls a name no tool is
// listed by as the one tool it stands for, reads a URI no resource is
// listed by as the one resource it stands for, and refuses either,
// naming them, when it stands for several.

// indexApps indexes the tools of the sources that serve Apps by their
// names in the source: those with a prefix (without one, the two names
// are the same), except tools whose input schema binds arguments to
// headers, whose header checks name the listed tool, and names a tool is
// listed by, which call that tool. c.mu is held.
func (c *Catalog) indexApps() {
	var idx appIndex
	for _, n := range slices.Sorted(maps.Keys(c.sources)) {
		src := c.sources[n]
		if !src.apps || src.prefix == "" {
			continue
		}
		for name, t := range src.tools {
			local := src.local(name)
			if local == name || bindsHeaders(t.Tool.InputSchema) || c.listed(local) {
				continue
			}
			if idx == nil {
				idx = appIndex{}
			}
			idx[local] = append(idx[local], name)
		}
	}
	for _, names := range idx {
		slices.Sort(names)
	}
	c.apps.Store(&idx)
	c.indexAppURIs()
}

// indexAppURIs indexes the ui:// resources of the sources that serve Apps
// with a prefix by their URIs in the source, except URIs a resource is
// listed by. c.mu is held.
func (c *Catalog) indexAppURIs() {
	idx := c.appURIIndex(func(string) bool { return true }, c.listedURI)
	c.appURIs.Store(&idx)
}

// appURIIndex maps the URI in its source of each ui:// resource served
// under a prefix (see [mcpapps.Served]) that serves says is served to
// the URIs of those served, sorted; own URIs that listed says a resource
// is listed by are left out, for they read that resource. c.mu is held.
func (c *Catalog) appURIIndex(serves, listed func(uri string) bool) appIndex {
	var idx appIndex
	for _, n := range slices.Sorted(maps.Keys(c.sources)) {
		src := c.sources[n]
		if !src.apps || src.prefix == "" {
			continue
		}
		for served := range src.resources {
			own, ok := mcpapps.Upstream(src.prefix, served)
			if !ok || own == served || !mcpapps.IsURI(served) || !serves(served) || listed(own) {
				continue
			}
			if idx == nil {
				idx = appIndex{}
			}
			idx[own] = append(idx[own], served)
		}
	}
	for _, uris := range idx {
		slices.Sort(uris)
	}
	return idx
}

// AppResource returns the URIs the catalog lists the resources by that a
// source serving MCP Apps gives uri itself (see [mcpapps.Served]), sorted;
// nil for none, and for a URI a resource is listed by. It is one map
// lookup.
func (c *Catalog) AppResource(uri string) []string {
	if idx := c.appURIs.Load(); idx != nil {
		return (*idx)[uri]
	}
	return nil
}

// listedURI reports whether a resource is listed by uri. c.mu is held.
func (c *Catalog) listedURI(uri string) bool {
	if slices.ContainsFunc(c.resources, func(r resource) bool { return r.r.URI == uri }) {
		return true
	}
	for _, src := range c.sources {
		if _, ok := src.resources[uri]; ok {
			return true
		}
	}
	return false
}

// AppTool returns the names the catalog lists the tools by that a
// source serving MCP Apps names name itself, sorted; nil for none, and
// for a name a tool is listed by. It is one map lookup.
func (c *Catalog) AppTool(name string) []string {
	if idx := c.apps.Load(); idx != nil {
		return (*idx)[name]
	}
	return nil
}

// listed reports whether a tool is listed by name, as HasTool does.
// c.mu is held.
func (c *Catalog) listed(name string) bool {
	if c.names[name] || c.running[name] {
		return true
	}
	for _, src := range c.sources {
		if _, ok := src.tools[name]; ok {
			return true
		}
	}
	return false
}
