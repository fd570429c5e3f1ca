package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/curation"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// Catalog is the set of tools, resources, resource templates and prompts
// built from [Options]. Build it once with [New]; then, for every server,
// call [Catalog.Apply] on the server options, [Catalog.Register] on the
// server and, if the server lives long enough, [Catalog.Run].
type Catalog struct {
	tools     []Tool
	resources []resource
	templates []resourceTemplate
	prompts   []prompt

	// completions maps a completion reference ("ref/prompt name" or
	// "ref/resource uri-template") and an argument name to the values
	// offered for it.
	completions map[completionKey][]string
	// subscriptions is whether clients may subscribe to resource updates.
	subscriptions bool
	// watchedURI, when set, is a resource Run reports as updated every
	// watchInterval.
	watchedURI    string
	watchInterval time.Duration

	logger *slog.Logger

	// origin is the source of what is added from now on (see SetOrigin).
	origin string

	// names holds the names of tools, for HasTool. running holds those of
	// tools added to a server while it serves (see addRunningTool), and
	// sources what sources outside the catalog offer (see SetSource): their
	// tools exist as much as the others. servers are the servers Register
	// has seen, which SetSource updates.
	names   map[string]bool
	mu      sync.RWMutex
	running map[string]bool
	// runningOn holds the names of the tools added to each server while
	// it serves, for the views (see ServerView.HasTool).
	runningOn map[*sdk.Server]map[string]bool
	sources   map[string]*source
	servers   []*sdk.Server
	// views are the views RegisterView made, which SetSource updates.
	views []*ServerView
	// forwardToSources: see ForwardToSources.
	forwardToSources bool
	// taskTools is how tools' calls may run as tasks, where that is set
	// by SetTaskSupport rather than by the tool (config, upstream tools).
	taskTools map[string]tasks.ToolTasks
	// declaredTasks is what the catalog's own task tools declare, filled
	// as they are added, before any server is built: read without a lock.
	declaredTasks map[string]tasks.ToolTasks
	// annotations are the hints of the catalog's own tools, by name,
	// filled as they are added, as names is: read without a lock.
	annotations map[string]*sdk.ToolAnnotations
	// noSession holds the names of the catalog's own tools that use no
	// session (see NoSession), filled as they are added: read without a
	// lock, as declaredTasks.
	noSession map[string]bool
	// apps indexes the tools of sources that serve MCP Apps by their
	// names in the source (apps.go); replaced whole under mu.
	apps atomic.Pointer[appIndex]
	// appURIs indexes the ui:// resources of those sources by their URIs
	// in the source (apps.go); replaced whole under mu.
	appURIs atomic.Pointer[appIndex]
}

// Tool is one tool, ready to add to any server. Add receives the server so
// that tools which change the server's lists (conformance) can reach it.
type Tool struct {
	Name  string
	Add   func(s *sdk.Server)
	Tasks tasks.ToolTasks
	// NoSession says that the handler uses nothing of the session its
	// request comes on (req.Session: no logging, progress, sampling,
	// elicitation or roots through it), so a 2026-07-28 call of it may be
	// served without a session made for the one request (see
	// [Catalog.NoSession]).
	NoSession bool

	// sources are the sources the tool belongs to, set when it is added to
	// a catalog: one, or more when toolsets share the tool.
	sources []string
	// input returns the tool's input schema as the SDK serves it; nil when
	// not known (a Tool made without NewTool).
	input func() (any, error)
	// annotations are the tool's hints; nil when it has none or they are
	// not known (a Tool made without NewTool).
	annotations *sdk.ToolAnnotations
}

type resource struct {
	r      *sdk.Resource
	h      sdk.ResourceHandler
	source string
}

type resourceTemplate struct {
	t      *sdk.ResourceTemplate
	h      sdk.ResourceHandler
	source string
}

type prompt struct {
	p      *sdk.Prompt
	h      sdk.PromptHandler
	source string
}

type completionKey struct {
	ref, arg string
}

// NewTool pairs a tool with its typed handler. The SDK infers the schemas it
// is not given from In and Out and validates input before h runs. An input
// schema given as a [jsonschema.Schema] reaches the SDK already encoded (see
// [encodedInputSchema]).
func NewTool[In, Out any](t *sdk.Tool, h sdk.ToolHandlerFor[In, Out]) Tool {
	t = encodedInputSchema(t)
	tl := Tool{Name: t.Name, Add: func(s *sdk.Server) { sdk.AddTool(s, t, h) }, input: inferredInput[In], annotations: t.Annotations}
	if schema := t.InputSchema; schema != nil {
		tl.input = func() (any, error) { return schema, nil }
	}
	return tl
}

// inferredInput returns the input schema the SDK infers for a tool whose
// handler takes In and that gives none (see [sdk.AddTool]).
func inferredInput[In any]() (any, error) {
	rt := reflect.TypeFor[In]()
	if rt == reflect.TypeFor[any]() {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	return jsonschema.ForType(rt, &jsonschema.ForOptions{})
}

// NewTaskTool is NewTool for a tool whose calls may run as tasks.
func NewTaskTool[In, Out any](t *sdk.Tool, h sdk.ToolHandlerFor[In, Out], tt tasks.ToolTasks) Tool {
	tl := NewTool(t, h)
	tl.Tasks = tt
	return tl
}

// New returns an empty catalog; logger receives its diagnostics (nil
// discards them).
func New(logger *slog.Logger) *Catalog {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Catalog{
		completions: map[completionKey][]string{},
		logger:      logger,
		origin:      curation.SourceProgram,
		names:       map[string]bool{},
		running:     map[string]bool{},
		runningOn:   map[*sdk.Server]map[string]bool{},
		sources:     map[string]*source{},
	}
}

// SetOrigin makes name the source of the tools, resources, templates and
// prompts added to c from now on, which views select them by (see
// [curation.ToolSelection.Source]), and returns the source it replaces.
// Until it is called, the source is [curation.SourceProgram].
func (c *Catalog) SetOrigin(name string) (previous string) {
	previous, c.origin = c.origin, name
	return previous
}

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
		if v.s == s && v.AppTool(t.Name) != nil {
			v.refresh()
		}
	}
	c.mu.Unlock()
	sdk.AddTool(s, t, h)
}

// encodedInputSchema returns t with its input schema encoded once, as JSON,
// if it is a [jsonschema.Schema]; otherwise t itself. On every tools/call of
// protocol 2026-07-28 and later the SDK encodes the tool's input schema
// again to look for x-mcp-header annotations. Encoding a jsonschema.Schema
// walks it by reflection, which costs far more than copying JSON that is
// already encoded. The SDK resolves the schema from these bytes to validate arguments,
// exactly as from the struct, and tools/list shows the same JSON.
func encodedInputSchema(t *sdk.Tool) *sdk.Tool {
	s, ok := t.InputSchema.(*jsonschema.Schema)
	if !ok || s == nil {
		return t
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("tools: %s: input schema: %v", t.Name, err))
	}
	tt := *t
	tt.InputSchema = json.RawMessage(b)
	return &tt
}

// Apply sets the handlers on so that the catalog needs: a CompletionHandler
// when a prompt or resource template offers completions, and the
// Subscribe/Unsubscribe handlers when a resource can be watched (the
// conformance toolset). It leaves every other field untouched. A completion
// handler already set keeps answering for references the catalog does not
// know.
func (c *Catalog) Apply(so *sdk.ServerOptions) {
	c.mu.RLock()
	forward := c.forwardToSources
	c.mu.RUnlock()
	if len(c.completions) > 0 || forward {
		next := so.CompletionHandler
		so.CompletionHandler = func(ctx context.Context, req *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
			res, ok := c.complete(req)
			if ok {
				return res, nil
			}
			if forward {
				if sres, ok, err := c.completeFromSource(ctx, req); ok {
					return sres, err
				}
			}
			if next == nil {
				return res, nil
			}
			return next(ctx, req)
		}
	}
	switch {
	case forward:
		// The SDK tracks subscriptions itself; the handlers pass those to
		// sources' resources on.
		so.SubscribeHandler = func(ctx context.Context, req *sdk.SubscribeRequest) error {
			return c.subscribeToSource(ctx, req.Params.URI, false)
		}
		so.UnsubscribeHandler = func(ctx context.Context, req *sdk.UnsubscribeRequest) error {
			return c.subscribeToSource(ctx, req.Params.URI, true)
		}
	case c.subscriptions:
		// The SDK tracks subscriptions itself; the handlers only accept them.
		so.SubscribeHandler = func(context.Context, *sdk.SubscribeRequest) error { return nil }
		so.UnsubscribeHandler = func(context.Context, *sdk.UnsubscribeRequest) error { return nil }
	}
}

// Register adds every tool, resource, resource template and prompt to s,
// those of sources (see [Catalog.SetSource]) included, and keeps s up to
// date with the sources from now on.
func (c *Catalog) Register(s *sdk.Server) {
	c.mu.Lock()
	c.servers = append(c.servers, s)
	for _, n := range slices.Sorted(maps.Keys(c.sources)) {
		addSource(s, c.sources[n])
	}
	c.mu.Unlock()
	for _, t := range c.tools {
		t.Add(s)
	}
	for _, r := range c.resources {
		s.AddResource(r.r, r.h)
	}
	for _, t := range c.templates {
		s.AddResourceTemplate(t.t, t.h)
	}
	for _, p := range c.prompts {
		s.AddPrompt(p.p, p.h)
	}
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

// Run does the background work the catalog needs until ctx is done: with the
// conformance toolset, it reports the watched resource as updated every few
// seconds. Without it, Run returns at once.
func (c *Catalog) Run(ctx context.Context, s *sdk.Server) {
	if c.watchedURI == "" {
		return
	}
	tick := time.NewTicker(c.watchInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := s.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: c.watchedURI}); err != nil && ctx.Err() == nil {
				c.logger.Debug("tools: resource update notification failed", "uri", c.watchedURI, "err", err)
			}
		}
	}
}

// complete answers a completion request from the catalog's completion
// values: those starting with the typed value, case-insensitively, at most
// 100 of them as the protocol allows. ok is false for an unknown reference.
func (c *Catalog) complete(req *sdk.CompleteRequest) (res *sdk.CompleteResult, ok bool) {
	res = &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: []string{}}}
	p := req.Params
	if p == nil || p.Ref == nil {
		return res, false
	}
	ref := p.Ref.Type + " " + p.Ref.Name
	if p.Ref.Type == "ref/resource" {
		ref = p.Ref.Type + " " + p.Ref.URI
	}
	values, ok := c.completions[completionKey{ref, p.Argument.Name}]
	if !ok {
		return res, c.knowsRef(ref)
	}
	prefix := strings.ToLower(p.Argument.Value)
	var match []string
	for _, v := range values {
		if strings.HasPrefix(strings.ToLower(v), prefix) {
			match = append(match, v)
		}
	}
	const maxValues = 100
	res.Completion.Total = len(match)
	if len(match) > maxValues {
		match, res.Completion.HasMore = match[:maxValues], true
	}
	res.Completion.Values = append(res.Completion.Values, match...)
	return res, true
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

// AddCompletions offers values to complete argument arg of the prompt or
// resource template ref (refType "ref/prompt" or "ref/resource").
func (c *Catalog) AddCompletions(refType, ref, arg string, values []string) {
	if len(values) > 0 {
		c.completions[completionKey{refType + " " + ref, arg}] = values
	}
}

// Public is a catalog as the public package tools shows it to programs
// built on Portcullis: tools.Catalog is defined on it (type Catalog
// Public), so the root package turns a *Public into the *tools.Catalog
// programs add their tools to with a conversion, and neither package
// needs to know the other's type. Its one method serves tools.
type Public struct{ c *Catalog }

// Public returns c as package tools shows it (see [Public]).
func (c *Catalog) Public() *Public { return &Public{c} }

// Catalog returns the catalog p shows.
func (p *Public) Catalog() *Catalog { return p.c }
