package catalog

import (
	"fmt"
	"slices"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// Building the catalog: its own tools, resources, templates and prompts,
// and how their calls may run as tasks, added before servers are built
// (a conformance tool may add tools to a server while it serves).

// Add adds ts to c. A tool whose name c already has is skipped: two
// toolsets may share one (the calculator), which then belongs to both.
func (c *Catalog) Add(ts ...Tool) {
	for _, t := range ts {
		if c.names[t.Name] {
			if i := slices.IndexFunc(c.tools, func(x Tool) bool { return x.Name == t.Name }); i >= 0 && !slices.Contains(c.tools[i].sources, c.origin) {
				c.tools[i].sources = append(c.tools[i].sources, c.origin)
			}
			continue
		}
		c.names[t.Name] = true
		t.sources = []string{c.origin}
		c.tools = append(c.tools, t)
		c.declareTasks(t)
		c.noteAnnotations(t)
		c.declareNoSession(t)
	}
}

// declareNoSession records that t uses no session, if it says so and its
// input schema binds no argument to a header (a call of such a tool is
// checked against its headers by the SDK's HTTP handler).
func (c *Catalog) declareNoSession(t Tool) {
	if !t.NoSession || t.input == nil {
		return
	}
	if schema, err := t.input(); err != nil || bindsHeaders(schema) {
		return
	}
	if c.noSession == nil {
		c.noSession = map[string]bool{}
	}
	c.noSession[t.Name] = true
}

// AddTool adds a tool with a typed handler to c, as [sdk.AddTool] adds one
// to a server: the SDK infers the schemas it is not given from In and Out
// and validates input before h runs. Add tools before building servers
// from c: a server knows the tools its catalog had when it was built, and
// answers a call of any other name as an unknown tool. AddTool panics if
// c already has a tool of that name.
func AddTool[In, Out any](c *Catalog, t *sdk.Tool, h sdk.ToolHandlerFor[In, Out]) {
	if c.names[t.Name] {
		panic(fmt.Sprintf("catalog: AddTool: a tool named %q is already in the catalog", t.Name))
	}
	c.names[t.Name] = true
	tl := NewTool(t, h)
	tl.sources = []string{c.origin}
	c.tools = append(c.tools, tl)
	c.noteAnnotations(tl)
}

// noteAnnotations keeps the hints of the catalog's own tool t for
// [Catalog.ToolFacts].
func (c *Catalog) noteAnnotations(t Tool) {
	if t.annotations == nil {
		return
	}
	if c.annotations == nil {
		c.annotations = map[string]*sdk.ToolAnnotations{}
	}
	c.annotations[t.Name] = t.annotations
}

// AddTaskTool adds a tool whose calls may run as tasks (see [tasks.Support])
// to c, as [AddTool] adds a plain one. With support [tasks.SupportOptional]
// or [tasks.SupportRequired] the whole handler runs as the task; input the
// handler asks for (InputRequests in its result) is surfaced by tasks/get
// and the handler is called again with the responses, as in a
// multi-round-trip call. A handler that wants to gather input before the
// task exists sets tt.HandlerStarts and calls [tasks.Run] when ready.
func AddTaskTool[In, Out any](c *Catalog, t *sdk.Tool, h sdk.ToolHandlerFor[In, Out], tt tasks.ToolTasks) {
	AddTool(c, t, h)
	c.tools[len(c.tools)-1].Tasks = tt
	c.declareTasks(c.tools[len(c.tools)-1])
}

// AddResource adds a resource, read by h, to c. Like [AddTool], call it
// before building servers from c.
func (c *Catalog) AddResource(r *sdk.Resource, h sdk.ResourceHandler) {
	c.resources = append(c.resources, resource{r: r, h: h, source: c.origin})
}

// AddPrompt adds a prompt, rendered by h, to c. Like [AddTool], call it
// before building servers from c.
func (c *Catalog) AddPrompt(p *sdk.Prompt, h sdk.PromptHandler) {
	c.prompts = append(c.prompts, prompt{p: p, h: h, source: c.origin})
}

// AddTemplate adds a resource template, read by h, to c. Like [AddTool],
// call it before building servers from c.
func (c *Catalog) AddTemplate(t *sdk.ResourceTemplate, h sdk.ResourceHandler) {
	c.templates = append(c.templates, resourceTemplate{t: t, h: h, source: c.origin})
}

// Watch lets clients subscribe to resources and makes [Catalog.Run]
// report the resource uri as updated every interval.
func (c *Catalog) Watch(uri string, interval time.Duration) {
	c.subscriptions = true
	c.watchedURI = uri
	c.watchInterval = interval
}

// AddRunningTool adds a tool to s while s serves, and records it in c, so
// that HasTool and ToolNames know it as they know the catalog's own tools.
func AddRunningTool[In, Out any](c *Catalog, s *sdk.Server, t *sdk.Tool, h sdk.ToolHandlerFor[In, Out]) {
	c.mu.Lock()
	c.running[t.Name] = true
	if c.runningOn[s] == nil {
		c.runningOn[s] = map[string]bool{}
	}
	c.runningOn[s][t.Name] = true
	// The name calls the tool now, not an App's tool it stood for.
	if c.AppTool(t.Name) != nil {
		c.indexApps()
	}
	for _, v := range c.views {
		if v.server() == s && v.AppTool(t.Name) != nil {
			v.refresh()
		}
	}
	c.mu.Unlock()
	sdk.AddTool(s, t, h)
}

// declareTasks records the task support t declares, if any.
func (c *Catalog) declareTasks(t Tool) {
	if t.Tasks.Support == tasks.SupportNone {
		return
	}
	if c.declaredTasks == nil {
		c.declaredTasks = map[string]tasks.ToolTasks{}
	}
	c.declaredTasks[t.Name] = t.Tasks
}

// SetTaskSupport says how calls of the tool named may run as tasks (see
// [tasks.Support]), whoever provides the tool: one of c's own or an
// upstream's. It overrides what the tool declared.
func (c *Catalog) SetTaskSupport(name string, tt tasks.ToolTasks) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.taskTools == nil {
		c.taskTools = map[string]tasks.ToolTasks{}
	}
	c.taskTools[name] = tt
}

// AddCompletions offers values to complete argument arg of the prompt or
// resource template ref (refType "ref/prompt" or "ref/resource").
func (c *Catalog) AddCompletions(refType, ref, arg string, values []string) {
	if len(values) > 0 {
		c.completions[completionKey{refType + " " + ref, arg}] = values
	}
}
