package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/suggest"
)

// What a caller may learn about tools follows one rule: a caller sees a
// tool when the tool is registered and either the policy lets the caller
// call it or the policy does not hide it (a tool guarded by scopes, which
// a client can step up to). tools/list lists only the tools the caller
// sees, and a tools/call of any other name, registered or not, gets the
// answer an unknown tool gets: a -32602 error whose hints are drawn from
// the tools the caller sees. So a hidden tool answers exactly as a name
// that does not exist, whichever era, transport or path the call takes,
// and its existence and the scopes it needs do not leak. A call of a tool
// the caller sees but may not call gets the spec's step-up answer over
// HTTP: 403 insufficient_scope naming the scopes (see [Deps.StepUp]).
//
// The HTTP handler applies the rule before the SDK sees a request (the
// SDK's transport checks a 2026-07-28 call's parameter headers against the
// registered tool, which would tell a hidden tool from a missing one); the
// SDK middleware applies it again for stdio and as a second line.

// Reasons of a [Denial].
const (
	// DenialPolicy: the tool is registered, and the policy refuses the caller.
	DenialPolicy = "policy"
	// DenialUnknownTool: no tool of that name is registered.
	DenialUnknownTool = "unknown_tool"
	// DenialStepUp: the tool is registered and not hidden, and the
	// caller's token lacks its scopes: the answer is the step-up 403.
	DenialStepUp = "insufficient_scope"
	// DenialRule: the tool is registered and the caller sees it, and an
	// expression rule of the policy refuses the call (see [Rules]): the
	// answer names the rule.
	DenialRule = "policy_rule"
)

// Denial is a tools/call refused by the gate: answered as an unknown
// tool, or with the step-up 403.
type Denial struct {
	// Tool is the name as the caller sent it; it is registered unless
	// Reason is [DenialUnknownTool].
	Tool string
	// Reason is [DenialPolicy], [DenialUnknownTool], [DenialStepUp] or
	// [DenialRule]. A name that stands for several tools of upstreams
	// serving Apps (see [CalledAs]) is not registered: [DenialUnknownTool].
	Reason string
	// Rule names the expression rule that refused the call, with
	// [DenialRule], and with [DenialPolicy] when a rule that hides the
	// tool refused it; empty otherwise.
	Rule string
	// CalledAs is the name the caller sent when Tool is the listed name
	// of the tool it stands for (see [CalledAs]); empty otherwise.
	CalledAs string
	// Needed are the scopes the policy says the call needs (sent to the
	// caller only with a step-up). Empty for an unknown tool.
	Needed []string
	// Info is the caller's token info; nil when auth is off.
	Info *sdkauth.TokenInfo
}

// DenialHook receives every [Denial]. It must be fast and must not block.
type DenialHook func(context.Context, Denial)

// Tools is the registry the gate asks which tools exist; *tools.Catalog
// is one. It must answer for tools added while the server runs too.
type Tools interface {
	HasTool(name string) bool
	ToolNames() []string // sorted
}

// Rules are the expression rules of a policy as the tool gate asks them
// (the root package's are internal/policy's). A rule that cannot be
// decided refuses. Tool names are the names callers call tools by.
type Rules interface {
	// Caller returns the name of the rule that refuses the caller with
	// info the tool, decided without the call's arguments, and whether
	// the rule hides the tool from it; "" when none refuses. It decides
	// tools/list as well as calls.
	Caller(ctx context.Context, info *sdkauth.TokenInfo, tool string) (rule string, hidden bool)
	// ArgumentRules reports whether calls of tool are decided on their
	// arguments too.
	ArgumentRules(tool string) bool
	// Arguments returns the name of the rule that refuses a call of tool
	// with args, the arguments the catalog's tool original is called
	// with (a virtual server's fixed arguments and defaults set); ""
	// when none refuses.
	Arguments(ctx context.Context, info *sdkauth.TokenInfo, tool, original string, args json.RawMessage) string
}

// toolGate decides, per caller, which tools exist and which it may call.
type toolGate struct {
	policy ToolPolicy // nil: every registered tool is visible
	rules  Rules      // nil: none
	tools  Tools
	apps   appTools // tools, when it serves MCP Apps' names (apps.go); else nil
	hook   DenialHook
	// stepUp is whether a caller may see a tool it may not call, and be
	// told which scopes would let it: over HTTP with auth on. Otherwise
	// every refused tool is hidden.
	stepUp bool
}

func newToolGate(policy ToolPolicy, rules Rules, tools Tools, hook DenialHook, stepUp bool) *toolGate {
	g := &toolGate{policy: policy, rules: rules, tools: tools, hook: hook, stepUp: stepUp}
	g.apps, _ = tools.(appTools)
	return g
}

// ruleRefusal is the answer to a call of a tool the caller sees that a
// rule refuses: it names the rule, nothing of its expression.
func ruleRefusal(rule string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("Forbidden: the policy rule %q refuses this call.", rule)}
}

// check returns nil, nil when the caller with info may call tool, by its
// listed name or one that stands for it (see [toolGate.resolve]). When
// the caller sees the tool but may not call it, it returns the scopes to
// step up to; otherwise the unknown-tool error, or the error that names
// the tools a name stands for. Either way it reports the denial.
func (g *toolGate) check(ctx context.Context, info *sdkauth.TokenInfo, tool string) (stepUp []string, jerr *jsonrpc.Error) {
	d := Denial{Tool: tool, Info: info, Reason: DenialUnknownTool}
	known := g.tools.HasTool(tool)
	if !known && g.apps != nil {
		listed, ambiguous := g.resolve(ctx, info, tool)
		if len(ambiguous) > 1 {
			g.report(ctx, d)
			return nil, ambiguousToolError(tool, ambiguous)
		}
		if listed != "" {
			d.Tool, d.CalledAs, tool, known = listed, tool, listed, true
		}
	}
	if known {
		ok, needed, hidden := true, []string(nil), false
		if g.policy != nil {
			ok, needed, hidden = g.policy(info, tool)
		}
		if ok && g.rules != nil {
			if rule, hides := g.rules.Caller(ctx, info, tool); rule != "" {
				d.Rule = rule
				if !hides && g.stepUp && info != nil {
					d.Reason = DenialRule
					g.report(ctx, d)
					return nil, ruleRefusal(rule)
				}
				ok = false
			}
		}
		if ok {
			return nil, nil
		}
		d.Reason, d.Needed = DenialPolicy, needed
		if d.Rule == "" && g.stepUp && !hidden && info != nil {
			d.Reason = DenialStepUp
			g.report(ctx, d)
			return needed, nil
		}
	}
	g.report(ctx, d)
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: unknownToolMessage(tool, g.visible(ctx, info))}
}

// report hands d to the hook. A call the SDK middleware resolved (see
// [resolveToolsMiddleware]) names its listed tool; d then carries the
// name the call used from ctx.
func (g *toolGate) report(ctx context.Context, d Denial) {
	if g.hook != nil {
		if d.CalledAs == "" {
			d.CalledAs = CalledAs(ctx)
		}
		g.hook(ctx, d)
	}
}

// sees reports whether the caller with info sees the registered tool.
func (g *toolGate) sees(ctx context.Context, info *sdkauth.TokenInfo, tool string) bool {
	if g.policy != nil {
		ok, _, hidden := g.policy(info, tool)
		if !ok {
			return g.stepUp && !hidden && info != nil
		}
	}
	if g.rules != nil {
		if rule, hidden := g.rules.Caller(ctx, info, tool); rule != "" {
			return g.stepUp && !hidden && info != nil
		}
	}
	return true
}

// filters reports whether the gate hides any tool from anyone.
func (g *toolGate) filters() bool { return g.policy != nil || g.rules != nil }

// visible returns the registered tools the caller sees, sorted.
func (g *toolGate) visible(ctx context.Context, info *sdkauth.TokenInfo) []string {
	names := g.tools.ToolNames()
	if !g.filters() {
		return names
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if g.sees(ctx, info, n) {
			out = append(out, n)
		}
	}
	return out
}

// arguments decides the argument rules of a call of tool with args, as
// the caller sent them: nil when none refuses, else the answer. view
// (nil for a server without one) sets a curated tool's fixed arguments
// and defaults first; arguments it refuses are the curation's to refuse,
// and pass here.
func (g *toolGate) arguments(ctx context.Context, info *sdkauth.TokenInfo, view *catalog.ServerView, tool string, args json.RawMessage) *jsonrpc.Error {
	if g.rules == nil || !g.rules.ArgumentRules(tool) {
		return nil
	}
	original := tool
	if view != nil {
		if t, ok := view.Tool(tool); ok {
			original = t.Original
			if t.Curated() {
				curated, err := t.Arguments(args)
				if err != nil {
					return nil
				}
				args = curated
			}
		}
	}
	rule := g.rules.Arguments(ctx, info, tool, original, args)
	if rule == "" {
		return nil
	}
	g.report(ctx, Denial{Tool: tool, Info: info, Reason: DenialRule, Rule: rule})
	return ruleRefusal(rule)
}

// unknownToolMessage names the closest of the known tools, which lets a
// model correct a typo, or lists them when there are few.
func unknownToolMessage(name string, known []string) string {
	msg := fmt.Sprintf("Unknown tool: %q.", name)
	if best := suggest.Closest(name, known); best != "" {
		return msg + fmt.Sprintf(" Did you mean %q?", best)
	}
	if len(known) > 0 && len(known) <= 20 {
		return msg + " Available tools: " + strings.Join(known, ", ") + "."
	}
	return msg + " Call tools/list to see the available tools."
}

// ToolPolicy reports whether the caller with token info may call tool, and
// if not, the scopes it would need and whether the tool is hidden from it
// (see [Denial]). info is nil when auth is off.
type ToolPolicy func(info *sdkauth.TokenInfo, tool string) (allowed bool, needed []string, hidden bool)

// resolve returns the listed name of the tool the caller with info calls
// by name, when name is not listed and stands for exactly one tool the
// caller sees; "" otherwise, with the listed names when it stands for
// several. It is one map lookup, and the policy's word on each tool
// found.
func (g *toolGate) resolve(ctx context.Context, info *sdkauth.TokenInfo, name string) (listed string, ambiguous []string) {
	if g.apps == nil {
		return "", nil
	}
	cands := g.apps.AppTool(name)
	if len(cands) == 0 {
		return "", nil
	}
	if len(cands) == 1 {
		if g.sees(ctx, info, cands[0]) {
			return cands[0], nil
		}
		return "", nil
	}
	var seen []string
	for _, c := range cands {
		if g.sees(ctx, info, c) {
			seen = append(seen, c)
		}
	}
	if len(seen) == 1 {
		return seen[0], nil
	}
	return "", seen
}
