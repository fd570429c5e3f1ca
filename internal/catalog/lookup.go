package catalog

import (
	"slices"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// What callers ask of the catalog's own tools and its sources' tools by
// name, on the call path: read under the read lock or without one.

// NoSession reports whether the catalog's own tool name uses nothing of
// the session its request comes on (see [Tool.NoSession]) and binds no
// argument to a header: a 2026-07-28 call of it may be served by the
// server's own tool handling with any session (mcp/direct.go). It is
// false for every other tool, an upstream's or one added while serving.
func (c *Catalog) NoSession(name string) bool {
	return c.noSession[name] && !c.runningTool(name)
}

// runningTool reports whether a tool named name was added to a server
// while it serves (see AddRunningTool).
func (c *Catalog) runningTool(name string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.running[name]
}

// ToolFacts returns what a policy may ask of the tool the root server
// lists as name: the upstream that offers it (its name in upstreams;
// empty for a tool of the catalog's own) and its annotations (nil when
// it has none). ok is false when c has no such tool.
func (c *Catalog) ToolFacts(name string) (upstream string, annotations *sdk.ToolAnnotations, ok bool) {
	if c.names[name] {
		return "", c.annotations[name], true
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, src := range c.sources {
		if t, ok := src.tools[name]; ok {
			return src.origin, t.Tool.Annotations, true
		}
	}
	return "", nil, c.running[name]
}

// TaskSupport returns how calls of the tool named may run as tasks.
func (c *Catalog) TaskSupport(name string) tasks.ToolTasks {
	c.mu.RLock()
	tt, ok := c.taskTools[name]
	c.mu.RUnlock()
	if ok {
		return tt
	}
	return c.declaredTasks[name]
}

// ToolNames returns the names of the tools that servers built from c
// have, sorted: those Register adds, and those the tools add while the
// servers run.
func (c *Catalog) ToolNames() []string {
	names := make([]string, 0, len(c.tools))
	for _, t := range c.tools {
		names = append(names, t.Name)
	}
	c.mu.RLock()
	for n := range c.running {
		if !c.names[n] {
			names = append(names, n)
		}
	}
	for _, src := range c.sources {
		for n := range src.tools {
			names = append(names, n)
		}
	}
	c.mu.RUnlock()
	slices.Sort(names)
	return slices.Compact(names)
}

// HasTool reports whether servers built from c have a tool of that name,
// as ToolNames would list it.
func (c *Catalog) HasTool(name string) bool {
	if c.names[name] {
		return true
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.running[name] {
		return true
	}
	for _, src := range c.sources {
		if _, ok := src.tools[name]; ok {
			return true
		}
	}
	return false
}

// knowsRef reports whether ref names a prompt or resource template of the
// catalog, whose other arguments simply have no completions.
func (c *Catalog) knowsRef(ref string) bool {
	for _, p := range c.prompts {
		if ref == "ref/prompt "+p.p.Name {
			return true
		}
	}
	for _, t := range c.templates {
		if ref == "ref/resource "+t.t.URITemplate {
			return true
		}
	}
	return false
}

// Direct returns the direct handler of a source's tool called name, or
// nil when its calls take the SDK server: the catalog's own tools, and a
// tool whose input schema binds arguments to headers (x-mcp-header), whose
// Mcp-Param-* headers the SDK server checks against the arguments.
func (c *Catalog) Direct(name string) DirectHandler {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, src := range c.sources {
		if h, ok := src.direct[name]; ok {
			return h
		}
	}
	return nil
}
