package catalog

import (
	"maps"
	"slices"
)

// MCP Apps. An App (io.modelcontextprotocol/ui), shown by the host, calls
// its server's tools by the names its server gave them, which the catalog
// lists under the upstream's prefix. So that it can, the catalog keeps,
// for every source that serves Apps (see [source.apps]), which tools each
// of its own names stands for; the servers' middleware (package mcp)
// calls a name no tool is listed by as the one tool it stands for, and
// refuses it, naming them, when it stands for several.

// appIndex maps a tool's name in its source to the names the tools of
// that name are listed by, sorted.
type appIndex map[string][]string

// indexApps indexes the tools of the sources that serve Apps by their
// names in the source: those with a prefix (without one, the two names
// are the same), except tools whose input schema binds arguments to
// headers, whose header checks name the listed tool. c.mu is held.
func (c *Catalog) indexApps() {
	var idx appIndex
	for _, n := range slices.Sorted(maps.Keys(c.sources)) {
		src := c.sources[n]
		if !src.apps || src.prefix == "" {
			continue
		}
		for name, t := range src.tools {
			local := src.local(name)
			if local == name || bindsHeaders(t.Tool.InputSchema) {
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
}

// AppTool returns the names the catalog lists the tools by that a
// source serving MCP Apps names name itself, sorted; nil for none. It is
// one map lookup.
func (c *Catalog) AppTool(name string) []string {
	if idx := c.apps.Load(); idx != nil {
		return (*idx)[name]
	}
	return nil
}
