package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/mcpapps"
	"github.com/portcullis-mcp/portcullis/internal/mcpname"
)

// maxListed bounds the items read from one list, across its pages: an
// upstream that pages forever (or loops its cursors) is cut off there.
const maxListed = 10_000

// maxPages bounds the pages read from one list.
const maxPages = 1_000

// sync reads the upstream's lists and puts them in the catalog. A clash
// leaves the catalog as it was and is logged as an error.
func (s *supervisor) sync(ctx context.Context, sess *sdk.ClientSession) error {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	set, err := s.list(ctx, sess)
	if err != nil {
		return fmt.Errorf("upstream: %s: listing: %w", s.opts.Name, err)
	}
	bound := map[string]bool{}
	for _, t := range set.Tools {
		if in, _ := t.Tool.InputSchema.(json.RawMessage); hasHeaderBindings(in) {
			name := t.Tool.Name
			if s.prefix != "" {
				name = strings.TrimPrefix(name, s.prefix+"_")
			}
			bound[name] = true
		}
	}
	s.headerTools.Store(bound)
	skipped, err := s.setSource(set)
	if err != nil {
		s.logger.Error("upstream: its tools, resources and prompts are not served", "error", err)
		return fmt.Errorf("upstream: %s: %w", s.opts.Name, err)
	}
	if len(skipped) > 0 {
		s.logger.Warn("upstream: resources left out: another server serves their URIs", "skipped", skipped)
	}
	s.logger.Info("upstream: lists updated", "tools", len(set.Tools), "resources", len(set.Resources),
		"resource_templates", len(set.Templates), "prompts", len(set.Prompts))
	return nil
}

// setSource hands set to the catalog. The SDK panics on a tool it cannot
// serve; list filters those out, and a panic left is an error here, not a
// crash.
func (s *supervisor) setSource(set catalog.Set) (skipped []string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("upstream: %s: the catalog refused the lists: %v", s.opts.Name, p)
		}
	}()
	// Virtual servers (catalog.ServerView) select the upstream's tools
	// and prompts by its name, and match their names without the prefix;
	// a URI another upstream offers too is served by the first in the
	// configuration.
	set.Origin, set.Prefix, set.Order = s.opts.Name, s.prefix, s.order
	s.apps.Store(servesApps(set))
	return s.cat.SetSource("upstream "+s.opts.Name, set)
}

// list reads every list the upstream offers, following pagination.
func (s *supervisor) list(ctx context.Context, sess *sdk.ClientSession) (catalog.Set, error) {
	var set catalog.Set
	caps := &sdk.ServerCapabilities{}
	if r := sess.InitializeResult(); r != nil && r.Capabilities != nil {
		caps = r.Capabilities
	}
	if caps.Tools != nil {
		err := listAll(ctx, func(ctx context.Context, c string) ([]*sdk.Tool, string, error) {
			r, err := sess.ListTools(ctx, &sdk.ListToolsParams{Cursor: c})
			if err != nil {
				return nil, "", err
			}
			return r.Tools, r.NextCursor, nil
		}, func(t *sdk.Tool) {
			if st, ok := s.tool(t); ok {
				set.Tools = append(set.Tools, st)
			}
		})
		if err != nil {
			return set, fmt.Errorf("tools/list: %w", err)
		}
	}
	if caps.Resources != nil {
		err := listAll(ctx, func(ctx context.Context, c string) ([]*sdk.Resource, string, error) {
			r, err := sess.ListResources(ctx, &sdk.ListResourcesParams{Cursor: c})
			if err != nil {
				return nil, "", err
			}
			return r.Resources, r.NextCursor, nil
		}, func(r *sdk.Resource) {
			if r.URI != "" {
				rr := *r
				rr.URI = mcpapps.Served(s.prefix, r.URI)
				set.Resources = append(set.Resources, catalog.SetResource{Resource: &rr, Handler: s.serve.readResource})
			}
		})
		if err != nil {
			return set, fmt.Errorf("resources/list: %w", err)
		}
		err = listAll(ctx, func(ctx context.Context, c string) ([]*sdk.ResourceTemplate, string, error) {
			r, err := sess.ListResourceTemplates(ctx, &sdk.ListResourceTemplatesParams{Cursor: c})
			if err != nil {
				return nil, "", err
			}
			return r.ResourceTemplates, r.NextCursor, nil
		}, func(t *sdk.ResourceTemplate) {
			if t.URITemplate != "" && validTemplate(t.URITemplate) {
				tt := *t
				tt.URITemplate = mcpapps.Served(s.prefix, t.URITemplate)
				set.Templates = append(set.Templates, catalog.SetTemplate{Template: &tt, Handler: s.serve.readResource})
			}
		})
		if err != nil {
			return set, fmt.Errorf("resources/templates/list: %w", err)
		}
	}
	if caps.Completions != nil {
		set.Complete = s.serve.complete
	}
	if caps.Resources != nil && caps.Resources.Subscribe {
		set.Subscribe, set.Unsubscribe = s.subscribe, s.unsubscribe
	}
	if caps.Prompts != nil {
		err := listAll(ctx, func(ctx context.Context, c string) ([]*sdk.Prompt, string, error) {
			r, err := sess.ListPrompts(ctx, &sdk.ListPromptsParams{Cursor: c})
			if err != nil {
				return nil, "", err
			}
			return r.Prompts, r.NextCursor, nil
		}, func(p *sdk.Prompt) {
			name := s.prefixed(p.Name)
			if p.Name == "" || !mcpname.Valid(name) {
				s.logger.Warn("upstream: a prompt is skipped: its namespaced name is not valid", "prompt", truncate(p.Name))
				return
			}
			pp := *p
			pp.Name = name
			set.Prompts = append(set.Prompts, catalog.SetPrompt{Prompt: &pp, Handler: s.serve.getPrompt(p.Name)})
		})
		if err != nil {
			return set, fmt.Errorf("prompts/list: %w", err)
		}
	}
	return set, nil
}

// listAll reads every page of a list, calling add on each item: it
// follows nextCursor until the upstream gives none, and stops with an
// error when a cursor comes back a second time (a loop) or the list
// exceeds maxListed items or maxPages pages, so that a misbehaving
// upstream can neither truncate the list silently nor page forever.
func listAll[T any](ctx context.Context, page func(ctx context.Context, cursor string) ([]T, string, error), add func(T)) error {
	seen := map[string]bool{}
	cursor, n := "", 0
	for pages := 1; ; pages++ {
		items, next, err := page(ctx, cursor)
		if err != nil {
			return err
		}
		for _, it := range items {
			if n++; n > maxListed {
				return fmt.Errorf("more than %d items", maxListed)
			}
			add(it)
		}
		switch {
		case next == "":
			return nil
		case seen[next]:
			return fmt.Errorf("page %d repeats an earlier cursor", pages)
		case pages >= maxPages:
			return fmt.Errorf("more than %d pages", maxPages)
		}
		seen[next] = true
		cursor = next
	}
}

// prefixed is name as served: under the upstream's prefix, if it has one.
func (s *supervisor) prefixed(name string) string {
	return servedName(s.prefix, name)
}

// tool returns the served form of an upstream tool: namespaced, with its
// schemas as JSON. ok is false for a tool that is filtered out or that the
// SDK could not serve (an invalid name, an input schema that is not an
// object).
func (s *supervisor) tool(t *sdk.Tool) (catalog.SetTool, bool) {
	if t == nil || t.Name == "" || !s.opts.allowed(t.Name) {
		return catalog.SetTool{}, false
	}
	name := s.prefixed(t.Name)
	if !mcpname.Valid(name) {
		s.logger.Warn("upstream: a tool is skipped: its namespaced name is not valid", "tool", truncate(name))
		return catalog.SetTool{}, false
	}
	in, ok := objectSchema(t.InputSchema)
	if !ok {
		s.logger.Warn("upstream: a tool is skipped: its input schema is not a JSON object schema", "tool", name)
		return catalog.SetTool{}, false
	}
	tt := *t
	tt.Name = name
	tt.Meta = s.servedMeta(t.Meta)
	tt.InputSchema = in
	tt.OutputSchema = nil
	if t.OutputSchema != nil {
		if out, ok := objectSchema(t.OutputSchema); ok {
			tt.OutputSchema = out
		}
	}
	return catalog.SetTool{Tool: &tt, Handler: s.serve.callTool(t.Name), Direct: s.serve.directTool(t.Name)}, true
}

// objectSchema encodes s as JSON if it is a schema of type object.
func objectSchema(s any) (json.RawMessage, bool) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, false
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil || m["type"] != "object" {
		return nil, false
	}
	return b, true
}

// validTemplate reports whether the SDK accepts t as a URI template; it
// panics on one it does not.
func validTemplate(t string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	s := sdk.NewServer(&sdk.Implementation{Name: "check"}, nil)
	s.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: t}, nil)
	return true
}
