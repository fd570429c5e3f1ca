package tools

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// Catalog is what a Portcullis server offers: its tools, resources and
// prompts, those of the built-in toolsets and upstream MCP servers
// included. A program gets it from the root package's Catalog option (and
// its Tool, TaskTool, Resource and Prompt options add to it); add to it
// before the server starts.
type Catalog catalog.Public

// cat is the catalog c shows.
func (c *Catalog) cat() *catalog.Catalog { return (*catalog.Public)(c).Catalog() }

// AddTool adds a tool with a typed handler to c, as [sdk.AddTool] adds one
// to a server: the SDK infers the schemas it is not given from In and Out
// and validates input before h runs. AddTool panics if c already has a
// tool of that name.
func AddTool[In, Out any](c *Catalog, t *sdk.Tool, h sdk.ToolHandlerFor[In, Out]) {
	catalog.AddTool(c.cat(), t, h)
}

// AddTaskTool adds a tool whose calls may run as tasks (see [tasks.Support])
// to c, as [AddTool] adds a plain one. With support [tasks.SupportOptional]
// or [tasks.SupportRequired] the whole handler runs as the task; input the
// handler asks for (InputRequests in its result) is surfaced by tasks/get
// and the handler is called again with the responses, as in a
// multi-round-trip call. A handler that wants to gather input before the
// task exists sets tt.HandlerStarts and calls [tasks.Run] when ready.
func AddTaskTool[In, Out any](c *Catalog, t *sdk.Tool, h sdk.ToolHandlerFor[In, Out], tt tasks.ToolTasks) {
	catalog.AddTaskTool(c.cat(), t, h, tt)
}

// AddResource adds a resource, read by h, to c.
func (c *Catalog) AddResource(r *sdk.Resource, h sdk.ResourceHandler) { c.cat().AddResource(r, h) }

// AddPrompt adds a prompt, rendered by h, to c.
func (c *Catalog) AddPrompt(p *sdk.Prompt, h sdk.PromptHandler) { c.cat().AddPrompt(p, h) }

// HasTool reports whether the server has a tool of that name: its own, a
// toolset's or an upstream's.
func (c *Catalog) HasTool(name string) bool { return c.cat().HasTool(name) }

// ToolNames returns the names of the server's tools, sorted.
func (c *Catalog) ToolNames() []string { return c.cat().ToolNames() }

// SetTaskSupport says how calls of the tool named may run as tasks (see
// [tasks.Support]), whoever provides the tool: one of c's own or an
// upstream's. It overrides what the tool declared.
func (c *Catalog) SetTaskSupport(name string, tt tasks.ToolTasks) { c.cat().SetTaskSupport(name, tt) }

// TaskSupport returns how calls of the tool named may run as tasks.
func (c *Catalog) TaskSupport(name string) tasks.ToolTasks { return c.cat().TaskSupport(name) }

// ResourceUpdated tells the clients subscribed to the resource uri that
// it changed.
func (c *Catalog) ResourceUpdated(ctx context.Context, uri string) { c.cat().ResourceUpdated(ctx, uri) }
