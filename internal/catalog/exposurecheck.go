package catalog

import (
	"fmt"
	"slices"

	"github.com/portcullis-mcp/portcullis/internal/curation"
	"github.com/portcullis-mcp/portcullis/internal/suggest"
)

// CheckExposure reports every problem of the exposure e against c as it
// is now, each keyed relative to e ("tools[0].fixed_arguments.region"): a
// selection that matches nothing (of a source c does not have, or not
// among the source's items); a curation the tool's input schema does not
// allow (see [curation.ToolSelection.CheckSchema]); two items exposed
// under one name; a tool exposed under the name another tool the server
// serves has on the root server. What needs no catalog is
// [curation.Exposure.Check]'s, which the configuration runs first.
//
// upstreams are the names of the upstreams configured, which may not have
// listed yet. An upstream connects while servers run, and its lists
// change: a selection of an upstream that matches nothing is a warning,
// and the server exposes what the selection names when the upstream lists
// it. A source whose set is [Set.Fixed] is checked as the catalog's own.
func (c *Catalog) CheckExposure(e curation.Exposure, upstreams []string) []curation.Problem {
	c.mu.RLock()
	it := c.items()
	listed := map[string]bool{}
	changing := map[string]bool{}
	for _, src := range c.sources {
		listed[src.origin] = true
		if !src.fixed {
			changing[src.origin] = true
		}
	}
	c.mu.RUnlock()

	ec := &exposureCheck{e: &e, items: it, listed: listed, upstream: changing}
	for _, u := range upstreams {
		ec.upstream[u] = true
	}
	var ps []curation.Problem
	ps = append(ps, ec.tools()...)
	ps = append(ps, ec.resources()...)
	ps = append(ps, ec.prompts()...)
	return ps
}

// exposureCheck is what CheckExposure checks an exposure against.
type exposureCheck struct {
	e        *curation.Exposure
	items    catalogItems
	upstream map[string]bool // upstreams, listed or configured
	listed   map[string]bool // upstreams that have listed
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
func (ec *exposureCheck) none(key, kind, field string, cands []candidate, source, pattern string, single bool) []curation.Problem {
	if ec.upstream[source] {
		switch {
		case single:
			return []curation.Problem{{Key: key + "." + field, Warning: true, Message: fmt.Sprintf(
				"upstream %q does not list a %s %q (yet): the server exposes it when the upstream lists it", source, kind, pattern)}}
		case ec.listed[source]:
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

func (ec *exposureCheck) tools() []curation.Problem {
	var ps []curation.Problem
	cands := candidates(ec.items.tools)
	for i := range ec.e.Tools {
		sel := &ec.e.Tools[i]
		key := fmt.Sprintf("tools[%d]", i)
		if sel.Source == "" {
			continue // curation.Exposure.Check reports it
		}
		found := matches(cands, sel.Source, sel.Name, sel.Single())
		if len(found) == 0 {
			ps = append(ps, ec.none(key, "tool", "name", cands, sel.Source, sel.Name, sel.Single())...)
			continue
		}
		if !sel.Single() || !sel.Curated() {
			continue
		}
		for _, m := range found {
			ps = append(ps, ec.toolSchema(key, sel, ec.items.tools[m])...)
		}
	}
	picks, clashes := resolve(toolSelectors(ec.e), cands)
	for _, cl := range clashes {
		ps = append(ps, clashProblem("tools", "tool", ec.e.Tools[cl.sel].ExposeAs != "", cl, cands))
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
func (ec *exposureCheck) toolSchema(key string, sel *curation.ToolSelection, t item[toolReg]) []curation.Problem {
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

func (ec *exposureCheck) resources() []curation.Problem {
	var ps []curation.Problem
	res, tmpl := candidates(ec.items.resources), candidates(ec.items.templates)
	for i, sel := range ec.e.Resources {
		key := fmt.Sprintf("resources[%d]", i)
		if sel.Source == "" {
			continue // curation.Exposure.Check reports it
		}
		if len(matches(res, sel.Source, sel.URI, sel.Single()))+len(matches(tmpl, sel.Source, sel.URI, sel.Single())) == 0 {
			ps = append(ps, ec.none(key, "resource", "uri", append(slices.Clone(res), tmpl...), sel.Source, sel.URI, sel.Single())...)
		}
	}
	for _, cands := range [][]candidate{res, tmpl} {
		_, clashes := resolve(resourceSelectors(ec.e), cands)
		for _, cl := range clashes {
			ps = append(ps, clashProblem("resources", "resource", false, cl, cands))
		}
	}
	return ps
}

func (ec *exposureCheck) prompts() []curation.Problem {
	var ps []curation.Problem
	cands := candidates(ec.items.prompts)
	for i, sel := range ec.e.Prompts {
		key := fmt.Sprintf("prompts[%d]", i)
		if sel.Source == "" {
			continue // curation.Exposure.Check reports it
		}
		if len(matches(cands, sel.Source, sel.Name, sel.Single())) == 0 {
			ps = append(ps, ec.none(key, "prompt", "name", cands, sel.Source, sel.Name, sel.Single())...)
		}
	}
	_, clashes := resolve(promptSelectors(ec.e), cands)
	for _, cl := range clashes {
		ps = append(ps, clashProblem("prompts", "prompt", ec.e.Prompts[cl.sel].ExposeAs != "", cl, cands))
	}
	return ps
}
