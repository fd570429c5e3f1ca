package catalog

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/portcullis-mcp/portcullis/internal/curation"
	"github.com/portcullis-mcp/portcullis/internal/suggest"
)

// ValidateView reports every problem of the view keep against c as it is
// now, each keyed relative to the view ("tools[0].fixed_arguments.region"):
// those of [curation.View.Check]; a source that is neither a source of
// c's items, [curation.SourceProgram], an upstream that has listed, nor
// one of upstreams (the names of the upstreams configured, which may not
// have listed yet); a selection that matches nothing; a curation the
// tool's input schema does not allow (see
// [curation.ToolSelection.CheckSchema]); two items exposed under one
// name; a tool exposed under the name another tool the server serves has
// on the root server.
//
// An upstream connects while servers run, and its lists change: a
// selection of an upstream that matches nothing is a warning, and the
// server exposes what the selection names when the upstream lists it.
func (c *Catalog) ValidateView(keep curation.View, upstreams []string) []curation.Problem {
	c.mu.RLock()
	it := c.items()
	listed := map[string]bool{}
	for _, src := range c.sources {
		listed[src.origin] = true
	}
	c.mu.RUnlock()

	vc := &viewCheck{keep: &keep, items: it, listed: listed, upstream: maps.Clone(listed),
		known: map[string]bool{curation.SourceProgram: true}}
	for _, u := range upstreams {
		vc.upstream[u] = true
	}
	for _, cs := range [][]candidate{candidates(it.tools), candidates(it.resources), candidates(it.templates), candidates(it.prompts)} {
		for _, cand := range cs {
			for _, s := range cand.sources {
				vc.known[s] = true
			}
		}
	}
	maps.Copy(vc.known, vc.upstream)

	ps := keep.Check()
	ps = append(ps, vc.tools()...)
	ps = append(ps, vc.resources()...)
	ps = append(ps, vc.prompts()...)
	return ps
}

// viewCheck is what ValidateView checks a view against.
type viewCheck struct {
	keep     *curation.View
	items    catalogItems
	known    map[string]bool // every source a selection may name
	upstream map[string]bool // upstreams, listed or configured
	listed   map[string]bool // upstreams that have listed
}

// source reports a selection's unknown source; ok is false when the
// selection cannot be checked further.
func (vc *viewCheck) source(key, source string) (p *curation.Problem, ok bool) {
	if source == "" {
		return nil, false // curation.View.Check reports it
	}
	if !vc.known[source] {
		return &curation.Problem{Key: key + ".source", Message: fmt.Sprintf("unknown source %q: the sources here are %s",
			source, strings.Join(slices.Sorted(maps.Keys(vc.known)), ", "))}, false
	}
	return nil, true
}

// matches returns the candidates a selection of source and pattern
// matches.
func matches(cands []candidate, source, pattern string, single bool) []int {
	var out []int
	for i, c := range cands {
		if !slices.Contains(c.sources, source) {
			continue
		}
		if (single && c.local == pattern) || (!single && curation.Match(pattern, c.local)) {
			out = append(out, i)
		}
	}
	return out
}

// none reports a selection that matches nothing, of kind ("tool").
func (vc *viewCheck) none(key, kind, field string, cands []candidate, source, pattern string, single bool) []curation.Problem {
	if vc.upstream[source] {
		switch {
		case single:
			return []curation.Problem{{Key: key + "." + field, Warning: true, Message: fmt.Sprintf(
				"upstream %q does not list a %s %q (yet): the server exposes it when the upstream lists it", source, kind, pattern)}}
		case vc.listed[source]:
			return []curation.Problem{{Key: key + "." + field, Warning: true, Message: fmt.Sprintf(
				"%q matches no %s upstream %q lists now", pattern, kind, source)}}
		}
		return nil
	}
	if !single {
		what := fmt.Sprintf("%q matches", pattern)
		if pattern == "" {
			what = "there is"
		}
		return []curation.Problem{{Key: key + "." + field, Message: fmt.Sprintf("%s no %s of source %q", what, kind, source)}}
	}
	msg := fmt.Sprintf("source %q has no %s %q", source, kind, pattern)
	var names []string
	for _, c := range cands {
		if slices.Contains(c.sources, source) {
			names = append(names, c.local)
		}
	}
	if best := suggest.Closest(pattern, names); best != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	return []curation.Problem{{Key: key + "." + field, Message: msg}}
}

func (vc *viewCheck) tools() []curation.Problem {
	var ps []curation.Problem
	cands := candidates(vc.items.tools)
	for i := range vc.keep.Tools {
		sel := &vc.keep.Tools[i]
		key := fmt.Sprintf("tools[%d]", i)
		p, ok := vc.source(key, sel.Source)
		if p != nil {
			ps = append(ps, *p)
		}
		if !ok {
			continue
		}
		found := matches(cands, sel.Source, sel.Name, sel.Single())
		if len(found) == 0 {
			ps = append(ps, vc.none(key, "tool", "name", cands, sel.Source, sel.Name, sel.Single())...)
			continue
		}
		if !sel.Single() || !sel.Curated() {
			continue
		}
		for _, m := range found {
			ps = append(ps, vc.toolSchema(key, sel, vc.items.tools[m])...)
		}
	}
	picks, clashes := resolve(toolSelectors(vc.keep), cands)
	for _, cl := range clashes {
		ps = append(ps, clashProblem("tools", "tool", vc.keep.Tools[cl.sel].ExposeAs != "", cl, cands))
	}
	// The server registers tools under their root names: a tool exposed
	// under the root name of another it serves would meet that one's
	// checks (the 2026-07-28 headers name tools by the names callers use).
	served := map[string]pick{}
	for _, p := range picks {
		served[cands[p.item].name] = p
	}
	for _, p := range picks {
		other, ok := served[p.exposed]
		if ok && other.item != p.item {
			ps = append(ps, curation.Problem{Key: fmt.Sprintf("tools[%d].expose_as", p.sel), Message: fmt.Sprintf(
				"%q is the name tool %q has on the root server, and this server serves that tool too (tools[%d], as %q): choose another name",
				p.exposed, cands[other.item].name, other.sel, other.exposed)})
		}
	}
	return ps
}

// toolSchema checks the curation sel against the input schema of the tool
// it selects.
func (vc *viewCheck) toolSchema(key string, sel *curation.ToolSelection, t item[toolReg]) []curation.Problem {
	var schema any
	switch {
	case t.reg.own == nil:
		schema = t.reg.set.Tool.InputSchema
	case t.reg.own.input != nil:
		var err error
		if schema, err = t.reg.own.input(); err != nil {
			return []curation.Problem{{Key: key + ".name", Message: fmt.Sprintf("the input schema of tool %q cannot be read: %v", t.name, err)}}
		}
	case len(sel.Arguments) > 0 || len(sel.FixedArguments) > 0:
		return []curation.Problem{{Key: key + ".name", Message: fmt.Sprintf("the catalog does not know the input schema of tool %q: its arguments cannot be curated", t.name)}}
	}
	var ps []curation.Problem
	for _, p := range sel.CheckSchema(schema) {
		p.Key = key + "." + p.Key
		ps = append(ps, p)
	}
	if sel.ExposeAs != "" && sel.ExposeAs != t.name && schema != nil && bindsHeaders(schema) {
		ps = append(ps, curation.Problem{Key: key + ".expose_as", Warning: true, Message: fmt.Sprintf(
			"tool %q binds arguments to headers (x-mcp-header): under another name, a 2026-07-28 call's Mcp-Param headers are not checked against its arguments", t.name)})
	}
	return ps
}

// clashProblem reports a clash of the selections of list ("tools") at the
// later one's name or expose_as.
func clashProblem(list, kind string, renamed bool, cl clash, cands []candidate) curation.Problem {
	key := fmt.Sprintf("%s[%d].name", list, cl.sel)
	if renamed {
		key = fmt.Sprintf("%s[%d].expose_as", list, cl.sel)
	}
	if cl.item == cl.first.item {
		return curation.Problem{Key: key, Message: fmt.Sprintf("%s[%d] already exposes %s %q as %q: one selection of an item per name",
			list, cl.first.sel, kind, cands[cl.item].name, cl.exposed)}
	}
	return curation.Problem{Key: key, Message: fmt.Sprintf("%s %q would be exposed as %q, the name %s[%d] gives %s %q",
		kind, cands[cl.item].name, cl.exposed, list, cl.first.sel, kind, cands[cl.first.item].name)}
}

func (vc *viewCheck) resources() []curation.Problem {
	var ps []curation.Problem
	res, tmpl := candidates(vc.items.resources), candidates(vc.items.templates)
	for i, sel := range vc.keep.Resources {
		key := fmt.Sprintf("resources[%d]", i)
		p, ok := vc.source(key, sel.Source)
		if p != nil {
			ps = append(ps, *p)
		}
		if !ok {
			continue
		}
		if len(matches(res, sel.Source, sel.URI, sel.Single()))+len(matches(tmpl, sel.Source, sel.URI, sel.Single())) == 0 {
			ps = append(ps, vc.none(key, "resource", "uri", append(slices.Clone(res), tmpl...), sel.Source, sel.URI, sel.Single())...)
		}
	}
	for _, cands := range [][]candidate{res, tmpl} {
		_, clashes := resolve(resourceSelectors(vc.keep), cands)
		for _, cl := range clashes {
			ps = append(ps, clashProblem("resources", "resource", false, cl, cands))
		}
	}
	return ps
}

func (vc *viewCheck) prompts() []curation.Problem {
	var ps []curation.Problem
	cands := candidates(vc.items.prompts)
	for i, sel := range vc.keep.Prompts {
		key := fmt.Sprintf("prompts[%d]", i)
		p, ok := vc.source(key, sel.Source)
		if p != nil {
			ps = append(ps, *p)
		}
		if !ok {
			continue
		}
		if len(matches(cands, sel.Source, sel.Name, sel.Single())) == 0 {
			ps = append(ps, vc.none(key, "prompt", "name", cands, sel.Source, sel.Name, sel.Single())...)
		}
	}
	_, clashes := resolve(promptSelectors(vc.keep), cands)
	for _, cl := range clashes {
		ps = append(ps, clashProblem("prompts", "prompt", vc.keep.Prompts[cl.sel].ExposeAs != "", cl, cands))
	}
	return ps
}
