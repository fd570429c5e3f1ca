package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/outbound"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// Toolset names accepted in [Options.Toolsets].
const (
	ToolsetCore        = "core"
	ToolsetConformance = "conformance"
	ToolsetWorkshop    = "workshop"
)

// knownToolsets lists the toolsets in the order error messages name them.
var knownToolsets = []string{ToolsetCore, ToolsetConformance, ToolsetWorkshop}

// Default values that [Options.Defaults] fills in.
const (
	DefaultWeatherBaseURL      = "https://api.open-meteo.com"
	DefaultWeatherGeocodingURL = "https://geocoding-api.open-meteo.com"
	DefaultWeatherTimeout      = 10 * time.Second

	// maxWeatherTimeout bounds WeatherOptions.Timeout: a tool call that waits
	// longer than this for an upstream is worse than a quick "try again".
	maxWeatherTimeout = time.Minute
)

// Options selects and configures the toolsets a server offers. It is the
// `tools:` section of the YAML config. The zero value, after [Options.Defaults],
// offers the core toolset and nothing else.
type Options struct {
	// Toolsets lists the enabled toolsets. Nil or empty means ["core"].
	// Known: core, workshop, conformance. The conformance toolset exists for
	// the official MCP conformance suite and is off unless listed.
	Toolsets []string `yaml:"toolsets" schema:"enum=core|workshop|conformance,unique"`
	// Weather configures the workshop toolset's weather tool.
	Weather WeatherOptions `yaml:"weather"`
	// Resources are resources declared in config, served whatever toolsets
	// are enabled.
	Resources []ResourceSpec `yaml:"resources"`
	// Prompts are prompts declared in config, served whatever toolsets are
	// enabled.
	Prompts []PromptSpec `yaml:"prompts"`
}

// WeatherOptions configures the weather tool's upstream, an
// Open-Meteo-compatible API. The tool sends no credentials upstream.
type WeatherOptions struct {
	// BaseURL is the forecast API root; the tool calls {BaseURL}/v1/forecast.
	// Empty means [DefaultWeatherBaseURL].
	BaseURL string `yaml:"base_url" schema:"url"`
	// GeocodingURL is the geocoding API root; the tool calls
	// {GeocodingURL}/v1/search. Empty means [DefaultWeatherGeocodingURL].
	GeocodingURL string `yaml:"geocoding_url" schema:"url"`
	// Timeout bounds each upstream call. Zero means [DefaultWeatherTimeout];
	// at most one minute.
	Timeout time.Duration `yaml:"timeout"`
}

// Defaults fills zero values with defaults. Call it before [Options.Validate].
func (o *Options) Defaults() {
	if len(o.Toolsets) == 0 {
		o.Toolsets = []string{ToolsetCore}
	}
	if o.Weather.BaseURL == "" {
		o.Weather.BaseURL = DefaultWeatherBaseURL
	}
	if o.Weather.GeocodingURL == "" {
		o.Weather.GeocodingURL = DefaultWeatherGeocodingURL
	}
	if o.Weather.Timeout == 0 {
		o.Weather.Timeout = DefaultWeatherTimeout
	}
}

// Validate reports every problem at once, as an [errors.Join] of errors whose
// text starts with the key path relative to Options, for example
// `toolsets[2]: unknown toolset "foo" (known: core, conformance, workshop)`.
// The caller prefixes the section name ("tools.").
//
// Validate reads the files that resources and prompts name, so that a
// missing file is reported here rather than when a client asks for it.
func (o *Options) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, name := range o.Toolsets {
		switch {
		case !slices.Contains(knownToolsets, name):
			errs = append(errs, fmt.Errorf("toolsets[%d]: unknown toolset %q (known: %s)", i, name, strings.Join(knownToolsets, ", ")))
		case seen[name]:
			errs = append(errs, fmt.Errorf("toolsets[%d]: toolset %q is listed twice", i, name))
		}
		seen[name] = true
	}
	errs = append(errs, o.Weather.validate("weather")...)
	errs = append(errs, validateResources(o.Resources)...)
	errs = append(errs, validatePrompts(o.Prompts)...)
	return errors.Join(errs...)
}

func (w *WeatherOptions) validate(path string) []error {
	var errs []error
	for key, raw := range map[string]string{"base_url": w.BaseURL, "geocoding_url": w.GeocodingURL} {
		if err := checkHTTPURL(raw); err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %w", path, key, err))
		}
	}
	if w.Timeout <= 0 || w.Timeout > maxWeatherTimeout {
		errs = append(errs, fmt.Errorf("%s.timeout: must be positive and at most %s (got %s)", path, maxWeatherTimeout, w.Timeout))
	}
	// Map iteration order is random; keep the report stable.
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errs
}

// checkHTTPURL reports whether raw is an absolute http or https URL without
// credentials, query or fragment.
func checkHTTPURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an absolute http or https URL")
	}
	if u.User != nil {
		return errors.New("must not contain credentials")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return errors.New("must not have a query or fragment")
	}
	return nil
}

// Deps are what toolsets need from the process. Every field may be nil.
type Deps struct {
	// HTTPClient makes upstream calls (weather). Nil means a client with
	// dial, TLS and header timeouts. The tools never forward the caller's
	// credentials, whatever the client.
	HTTPClient *http.Client
	// Now reads the clock. Nil means time.Now.
	Now func() time.Time
	// Logger receives diagnostics, never tool argument values. Nil discards.
	Logger *slog.Logger
}

func (d Deps) withDefaults() Deps {
	if d.HTTPClient == nil {
		d.HTTPClient = DefaultHTTPClient()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return d
}

// DefaultHTTPClient is the client tools use when [Deps] names none: it bounds
// every phase of a request but the body read, which the per-call context
// deadline covers. Wrap its Transport to instrument it.
func DefaultHTTPClient() *http.Client {
	return &http.Client{Transport: outbound.Transport(), Timeout: 30 * time.Second}
}

// Catalog is the set of tools, resources, resource templates and prompts
// built from [Options]. Build it once with [New]; then, for every server,
// call [Catalog.Apply] on the server options, [Catalog.Register] on the
// server and, if the server lives long enough, [Catalog.Run].
type Catalog struct {
	tools     []tool
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

	// names holds the names of tools, for HasTool. running holds those of
	// tools added to a server while it serves (see addRunningTool), and
	// sources what sources outside the catalog offer (see SetSource): their
	// tools exist as much as the others. servers are the servers Register
	// has seen, which SetSource updates.
	names   map[string]bool
	mu      sync.RWMutex
	running map[string]bool
	sources map[string]*source
	servers []*sdk.Server
	// forwardToSources: see ForwardToSources.
	forwardToSources bool
	// taskTools is how tools' calls may run as tasks, where that is set
	// by SetTaskSupport rather than by the tool (config, upstream tools).
	taskTools map[string]tasks.ToolTasks
	// declaredTasks is what the catalog's own task tools declare, filled
	// as they are added, before any server is built: read without a lock.
	declaredTasks map[string]tasks.ToolTasks
}

// tool is one tool, ready to add to any server. add receives the server so
// that tools which change the server's lists (conformance) can reach it.
type tool struct {
	name  string
	add   func(s *sdk.Server)
	tasks tasks.ToolTasks
}

type resource struct {
	r *sdk.Resource
	h sdk.ResourceHandler
}

type resourceTemplate struct {
	t *sdk.ResourceTemplate
	h sdk.ResourceHandler
}

type prompt struct {
	p *sdk.Prompt
	h sdk.PromptHandler
}

type completionKey struct {
	ref, arg string
}

// newTool pairs a tool with its typed handler. The SDK infers the schemas it
// is not given from In and Out and validates input before h runs. An input
// schema given as a [jsonschema.Schema] reaches the SDK already encoded (see
// [encodedInputSchema]).
func newTool[In, Out any](t *sdk.Tool, h sdk.ToolHandlerFor[In, Out]) tool {
	t = encodedInputSchema(t)
	return tool{name: t.Name, add: func(s *sdk.Server) { sdk.AddTool(s, t, h) }}
}

// AddTool adds a tool with a typed handler to c, as [sdk.AddTool] adds one
// to a server: the SDK infers the schemas it is not given from In and Out
// and validates input before h runs. Add tools before building servers
// from c: a server knows the tools its catalog had when it was built, and
// answers a call of any other name as an unknown tool. AddTool panics if
// c already has a tool of that name.
func AddTool[In, Out any](c *Catalog, t *sdk.Tool, h sdk.ToolHandlerFor[In, Out]) {
	if c.names[t.Name] {
		panic(fmt.Sprintf("tools: AddTool: a tool named %q is already in the catalog", t.Name))
	}
	c.names[t.Name] = true
	c.tools = append(c.tools, newTool(t, h))
}

// AddResource adds a resource, read by h, to c. Like [AddTool], call it
// before building servers from c.
func (c *Catalog) AddResource(r *sdk.Resource, h sdk.ResourceHandler) {
	c.resources = append(c.resources, resource{r: r, h: h})
}

// AddPrompt adds a prompt, rendered by h, to c. Like [AddTool], call it
// before building servers from c.
func (c *Catalog) AddPrompt(p *sdk.Prompt, h sdk.PromptHandler) {
	c.prompts = append(c.prompts, prompt{p: p, h: h})
}

// addRunningTool adds a tool to s while s serves, and records it in c, so
// that HasTool and ToolNames know it as they know the catalog's own tools.
func addRunningTool[In, Out any](c *Catalog, s *sdk.Server, t *sdk.Tool, h sdk.ToolHandlerFor[In, Out]) {
	c.mu.Lock()
	c.running[t.Name] = true
	c.mu.Unlock()
	sdk.AddTool(s, t, h)
}

// encodedInputSchema returns t with its input schema encoded once, as JSON,
// if it is a [jsonschema.Schema]; otherwise t itself. On every tools/call of
// protocol 2026-07-28 and later the SDK encodes the tool's input schema
// again to look for x-mcp-header annotations. Encoding a jsonschema.Schema
// walks it by reflection, about 25 µs for a small schema on the load
// harness's machine; copying JSON that is already encoded costs well under
// one. The SDK resolves the schema from these bytes to validate arguments,
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

// New builds the catalog that opts describe. opts should have passed
// [Options.Validate]; New repeats the checks it depends on.
func New(opts Options, deps Deps) (*Catalog, error) {
	opts.Defaults()
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	deps = deps.withDefaults()
	c := &Catalog{
		completions: map[completionKey][]string{},
		logger:      deps.Logger,
		names:       map[string]bool{},
		running:     map[string]bool{},
		sources:     map[string]*source{},
	}
	addTools := func(ts ...tool) {
		for _, t := range ts {
			// A tool shared by two toolsets (calculator) is registered once.
			if !c.names[t.name] {
				c.names[t.name] = true
				c.tools = append(c.tools, t)
				c.declareTasks(t)
			}
		}
	}
	for _, set := range opts.Toolsets {
		switch set {
		case ToolsetCore:
			addTools(coreTools(deps)...)
		case ToolsetWorkshop:
			addTools(workshopTools(opts.Weather, deps)...)
		case ToolsetConformance:
			addTools(conformanceTools(c)...)
			c.addConformanceContent()
		}
	}
	if err := c.addDeclared(opts.Resources, opts.Prompts); err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	return c, nil
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
		t.add(s)
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
func (c *Catalog) declareTasks(t tool) {
	if t.tasks.Support == tasks.SupportNone {
		return
	}
	if c.declaredTasks == nil {
		c.declaredTasks = map[string]tasks.ToolTasks{}
	}
	c.declaredTasks[t.name] = t.tasks
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
		names = append(names, t.name)
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

func (c *Catalog) addCompletions(refType, ref, arg string, values []string) {
	if len(values) > 0 {
		c.completions[completionKey{refType + " " + ref, arg}] = values
	}
}

// Schema helpers.

// schemaFor infers the JSON Schema of T, as the SDK would, so that a tool can
// add what struct tags cannot say (enums, bounds). It panics if T has no
// schema, which only a programming error causes and every test catches.
func schemaFor[T any](edit func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("tools: schema: %v", err))
	}
	if edit != nil {
		edit(s.Properties)
	}
	return s
}

// emptyObject is the input schema of a tool that takes no arguments.
func emptyObject() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}}
}

func ptr[T any](v T) *T { return &v }

// Annotations shared by most tools.

// readOnly describes a tool that only reads and has no side effects; open
// says whether it reaches outside the server (an upstream API).
func readOnly(title string, open bool) *sdk.ToolAnnotations {
	return &sdk.ToolAnnotations{
		Title:           title,
		ReadOnlyHint:    true,
		DestructiveHint: ptr(false),
		IdempotentHint:  true,
		OpenWorldHint:   ptr(open),
	}
}

// textResult is a result holding one text block.
func textResult(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}
