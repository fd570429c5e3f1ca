package catalog

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/mcpapps"
)

// Set is what a source outside the catalog offers while servers run, such
// as an upstream MCP server: tools, resources, resource templates and
// prompts, named as servers list them. See [Catalog.SetSource].
type Set struct {
	Tools     []SetTool
	Resources []SetResource
	Templates []SetTemplate
	Prompts   []SetPrompt
	// Complete answers completion requests for the set's prompts and
	// resource templates; nil when the source offers none. It is used
	// only by servers whose options [Catalog.Apply] set after
	// [Catalog.ForwardToSources].
	Complete func(context.Context, *sdk.CompleteRequest) (*sdk.CompleteResult, error)
	// Subscribe and Unsubscribe pass a client's resource subscription on
	// to the source, for the set's resources; nil when it takes none. The
	// source reports updates with [Catalog.ResourceUpdated]. Like
	// Complete, they are used only after [Catalog.ForwardToSources].
	Subscribe   func(ctx context.Context, uri string) error
	Unsubscribe func(ctx context.Context, uri string) error
	// Origin is the source's name in an exposure's selections (an
	// upstream's name, see [curation.ToolSelection.Source]); empty means
	// the name given to [Catalog.SetSource].
	Origin string
	// Prefix is what the set's tool and prompt names start with, followed
	// by "_" (an upstream's prefix), and selections' name patterns leave
	// out; empty means none.
	Prefix string
	// Order ranks the source among those that offer one resource URI (or
	// URI template): the lowest Order serves it, and of sources of one
	// Order the one whose name sorts first (an upstream's Order is its
	// place in the configuration). What the sources offer decides, never
	// the order in which they were set.
	Order int
}

// SetTool is a tool of a [Set] with its raw handler. The handler validates
// its own input, as for [sdk.Server.AddTool].
type SetTool struct {
	Tool    *sdk.Tool
	Handler sdk.ToolHandler
	// Direct, when set, serves the calls that the HTTP handler serves
	// without the SDK server (see [DirectHandler]); the others take
	// Handler through the SDK server.
	Direct DirectHandler
}

// A DirectHandler serves a tools/call of the 2026-07-28 era outside the
// SDK server: the HTTP handler decodes the request, runs the server's
// receiving middleware (telemetry, the tool gate, tasks, requestState
// sealing, the tool timeout, recovery) around the handler and encodes
// what it returns. It is for a tool whose call is forwarded to another
// server, where the SDK server's per-request session costs as much as
// the forwarding does. The request has no session: the HTTP handler
// serves directly only calls that ask for no notifications during the
// call (no progress token, no log level) and whose client takes
// multi-round-trip results itself. It returns a [*RawToolResult] to pass
// on a result as it was received, or any result the SDK server would
// send.
type DirectHandler func(ctx context.Context, req *sdk.CallToolRequest) (sdk.Result, error)

// RawToolResult is a tools/call result passed on as another server sent
// it: a complete result (not one that asks for input, not a task handle).
type RawToolResult struct {
	sdk.ResultBase
	// JSON is the result object as received.
	JSON json.RawMessage
	// IsError is the result's isError.
	IsError bool
	// NamesServer reports whether the result's _meta names the server
	// that made it (io.modelcontextprotocol/serverInfo), and HasResultType
	// whether it has a resultType: a result without them is sent with the
	// serving server's name and resultType "complete" added, as the SDK
	// server adds them to every result.
	NamesServer, HasResultType bool
}

// MarshalJSON returns the result as received.
func (r *RawToolResult) MarshalJSON() ([]byte, error) { return r.JSON, nil }

// ToolError reports whether the result is a tool's error result
// (isError), as telemetry classifies it.
func (r *RawToolResult) ToolError() bool { return r.IsError }

// SetResource is a resource of a [Set].
type SetResource struct {
	Resource *sdk.Resource
	Handler  sdk.ResourceHandler
}

// SetTemplate is a resource template of a [Set].
type SetTemplate struct {
	Template *sdk.ResourceTemplate
	Handler  sdk.ResourceHandler
}

// SetPrompt is a prompt of a [Set].
type SetPrompt struct {
	Prompt  *sdk.Prompt
	Handler sdk.PromptHandler
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

// bindsHeaders reports whether an input schema may bind arguments to
// headers: it names x-mcp-header anywhere. A schema that cannot be
// encoded is taken to.
func bindsHeaders(schema any) bool {
	raw, ok := schema.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(schema); err != nil {
			return true
		}
	}
	return bytes.Contains(raw, []byte(`"x-mcp-header"`))
}

// ErrClash is wrapped by the error [Catalog.SetSource] returns when a name
// of the set is already taken.
var ErrClash = errors.New("name clash")

// source is a Set as the catalog holds it, keyed by name (or URI).
type source struct {
	name, origin, prefix   string
	order                  int
	subscribe, unsubscribe func(ctx context.Context, uri string) error
	complete               func(context.Context, *sdk.CompleteRequest) (*sdk.CompleteResult, error)
	tools                  map[string]SetTool
	direct                 map[string]DirectHandler // tools' direct handlers, see newSource
	// offered are the resources and templates the set offers, and
	// resources and templates those of them the source serves: the
	// URIs no source ranked before it offers (see assignURIs).
	offeredResources map[string]SetResource
	offeredTemplates map[string]SetTemplate
	resources        map[string]SetResource
	templates        map[string]SetTemplate
	prompts          map[string]SetPrompt
	// apps is whether the source serves MCP Apps: a tool of it says
	// anything of Apps in its _meta, or a resource's URI is ui://.
	apps bool
}

func newSource(name string, s Set) *source {
	src := &source{
		name:             name,
		origin:           cmp.Or(s.Origin, name),
		prefix:           s.Prefix,
		order:            s.Order,
		complete:         s.Complete,
		subscribe:        s.Subscribe,
		unsubscribe:      s.Unsubscribe,
		tools:            make(map[string]SetTool, len(s.Tools)),
		offeredResources: make(map[string]SetResource, len(s.Resources)),
		offeredTemplates: make(map[string]SetTemplate, len(s.Templates)),
		prompts:          make(map[string]SetPrompt, len(s.Prompts)),
	}
	for _, t := range s.Tools {
		src.tools[t.Tool.Name] = t
		if t.Direct != nil && !bindsHeaders(t.Tool.InputSchema) {
			if src.direct == nil {
				src.direct = map[string]DirectHandler{}
			}
			src.direct[t.Tool.Name] = t.Direct
		}
		src.apps = src.apps || mcpapps.HasUI(t.Tool.Meta)
	}
	for _, r := range s.Resources {
		if _, dup := src.offeredResources[r.Resource.URI]; !dup {
			src.offeredResources[r.Resource.URI] = r
		}
		src.apps = src.apps || mcpapps.IsURI(r.Resource.URI)
	}
	for _, t := range s.Templates {
		if _, dup := src.offeredTemplates[t.Template.URITemplate]; !dup {
			src.offeredTemplates[t.Template.URITemplate] = t
		}
		src.apps = src.apps || mcpapps.IsURI(t.Template.URITemplate)
	}
	for _, p := range s.Prompts {
		src.prompts[p.Prompt.Name] = p
	}
	src.resources, src.templates = src.offeredResources, src.offeredTemplates
	return src
}

// before reports whether src ranks before o for a URI both offer.
func (src *source) before(o *source) bool {
	if src.order != o.order {
		return src.order < o.order
	}
	return src.name < o.name
}

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

// uris are the resources and templates a source serves.
type uris struct {
	resources map[string]SetResource
	templates map[string]SetTemplate
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

// unclaimed returns the items of offered whose keys taken lacks (offered
// itself when it is all of them), and adds their keys to taken.
func unclaimed[V any](offered map[string]V, taken map[string]bool) map[string]V {
	out := offered
	for k := range offered {
		if taken[k] {
			out = make(map[string]V, len(offered))
			for k, v := range offered {
				if !taken[k] {
					out[k] = v
				}
			}
			break
		}
	}
	for k := range out {
		taken[k] = true
	}
	return out
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

// removeMissing removes from s what prev serves and next does not.
func removeMissing(s *sdk.Server, prev, next *source) {
	if gone := missing(prev.tools, next.tools); len(gone) > 0 {
		s.RemoveTools(gone...)
	}
	if gone := missing(prev.resources, next.resources); len(gone) > 0 {
		s.RemoveResources(gone...)
	}
	if gone := missing(prev.templates, next.templates); len(gone) > 0 {
		s.RemoveResourceTemplates(gone...)
	}
	if gone := missing(prev.prompts, next.prompts); len(gone) > 0 {
		s.RemovePrompts(gone...)
	}
}

func addSource(s *sdk.Server, src *source) {
	for _, k := range slices.Sorted(maps.Keys(src.tools)) {
		t := src.tools[k]
		s.AddTool(t.Tool, t.Handler)
	}
	for _, k := range slices.Sorted(maps.Keys(src.resources)) {
		r := src.resources[k]
		s.AddResource(r.Resource, r.Handler)
	}
	for _, k := range slices.Sorted(maps.Keys(src.templates)) {
		t := src.templates[k]
		s.AddResourceTemplate(t.Template, t.Handler)
	}
	for _, k := range slices.Sorted(maps.Keys(src.prompts)) {
		p := src.prompts[k]
		s.AddPrompt(p.Prompt, p.Handler)
	}
}

// missing returns the keys of prev that next lacks.
func missing[V any](prev, next map[string]V) []string {
	var out []string
	for k := range prev {
		if _, ok := next[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
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

// completeFromSource answers req from the source that offers its prompt
// or resource template; ok is false when none does.
func (c *Catalog) completeFromSource(ctx context.Context, req *sdk.CompleteRequest) (res *sdk.CompleteResult, ok bool, err error) {
	p := req.Params
	if p == nil || p.Ref == nil {
		return nil, false, nil
	}
	c.mu.RLock()
	var h func(context.Context, *sdk.CompleteRequest) (*sdk.CompleteResult, error)
	for _, src := range c.sources {
		if src.complete == nil {
			continue
		}
		_, prompt := src.prompts[p.Ref.Name]
		_, tmpl := src.templates[p.Ref.URI]
		if (p.Ref.Type == "ref/prompt" && prompt) || (p.Ref.Type == "ref/resource" && tmpl) {
			h = src.complete
			break
		}
	}
	c.mu.RUnlock()
	if h == nil {
		return nil, false, nil
	}
	res, err = h(ctx, req)
	return res, true, err
}

// subscribeToSource passes a subscription (or, with unsub, its end) on to
// the source that offers uri. It does nothing for other URIs: the SDK
// tracks every subscription itself.
func (c *Catalog) subscribeToSource(ctx context.Context, uri string, unsub bool) error {
	c.mu.RLock()
	var h func(context.Context, string) error
	for _, src := range c.sources {
		if _, ok := src.resources[uri]; ok {
			h = src.subscribe
			if unsub {
				h = src.unsubscribe
			}
			break
		}
	}
	c.mu.RUnlock()
	if h == nil {
		return nil
	}
	return h(ctx, uri)
}

// ResourceUpdated tells the clients of every server that subscribed to uri
// that it changed.
func (c *Catalog) ResourceUpdated(ctx context.Context, uri string) {
	c.mu.RLock()
	servers := slices.Clone(c.servers)
	for _, v := range c.views {
		servers = append(servers, v.s)
	}
	c.mu.RUnlock()
	for _, s := range servers {
		if err := s.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			c.logger.Debug("tools: resource update notification failed", "uri", uri, "err", err)
		}
	}
}
