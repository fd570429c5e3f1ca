package catalog

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Serving: the SDK server options the catalog needs, registering its
// items on a server, and what a server forwards to sources (completions,
// subscriptions, resource updates).

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
		servers = append(servers, v.server())
	}
	c.mu.RUnlock()
	for _, s := range servers {
		if err := s.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			c.logger.Debug("tools: resource update notification failed", "uri", uri, "err", err)
		}
	}
}
