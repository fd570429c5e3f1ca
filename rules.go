package portcullis

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/policy"
	"github.com/portcullis-mcp/portcullis/mcp"
)

// ruleSpecs returns the expression rules of a policy, keyed under prefix
// ("auth." or "servers[0].auth.").
func ruleSpecs(prefix string, ps []auth.ToolPolicy) []policy.Spec {
	var specs []policy.Spec
	for i, tp := range ps {
		for j, r := range tp.Rules {
			specs = append(specs, policy.Spec{
				Key:    fmt.Sprintf("%spolicy[%d].rules[%d]", prefix, i, j),
				Tool:   tp.Tool,
				Name:   r.Name,
				Allow:  r.Allow,
				Hidden: tp.Hides(),
			})
		}
	}
	return specs
}

// compileRules compiles the expression rules of a policy; every problem
// is reported, keyed under prefix.
func compileRules(prefix string, ps []auth.ToolPolicy) (*policy.Set, error) {
	return policy.Compile(ruleSpecs(prefix, ps))
}

// toolFacts looks up what the rules may read of a tool, by the name
// callers call it (catalog.Catalog.ToolFacts, catalog.ServerView.ToolFacts).
type toolFacts func(name string) (upstream string, annotations *sdk.ToolAnnotations, ok bool)

// policyRules are a server's expression rules as its tool gate asks them
// (mcp.Rules).
type policyRules struct {
	set    *policy.Set
	server string // the virtual server, empty for /mcp
	facts  toolFacts
	// original returns the catalog's name of the tool callers call name.
	original func(name string) string
	now      func() time.Time
	logger   *slog.Logger
}

// newPolicyRules returns the rules of ps for the tool gate, or nil when
// ps has none (then the gate asks nothing). The configuration checked
// them at start.
func newPolicyRules(prefix string, ps []auth.ToolPolicy, server string, facts toolFacts, original func(string) string, logger *slog.Logger) (mcp.Rules, error) {
	set, err := compileRules(prefix, ps)
	if err != nil {
		return nil, err
	}
	if set.Len() == 0 {
		return nil, nil
	}
	return &policyRules{set: set, server: server, facts: facts, original: original, now: time.Now, logger: logger}, nil
}

// input fills in and c, the decision's input, for the caller pr (nil:
// none) of tool.
func (p *policyRules) input(in *policy.Input, c *policy.Caller, pr *auth.Principal, tool, original string) {
	*in = policy.Input{Now: p.now(), Tool: policy.Tool{Name: tool, Original: original, Server: p.server}}
	if pr != nil {
		*c = policy.Caller{
			Issuer: pr.Issuer, Subject: pr.Subject, ClientID: pr.ClientID,
			Scopes: pr.Scopes, Groups: pr.Roles, Claims: pr.Claims,
		}
		in.Caller = c
	}
	upstream, ann, _ := p.facts(tool)
	in.Tool.Upstream = upstream
	in.Tool.Annotations = policyAnnotations(ann)
}

// policyAnnotations are a tool's hints with MCP's defaults for those it
// leaves unset.
func policyAnnotations(a *sdk.ToolAnnotations) policy.Annotations {
	out := policy.Annotations{Destructive: true, OpenWorld: true}
	if a == nil {
		return out
	}
	out.Title, out.ReadOnly, out.Idempotent = a.Title, a.ReadOnlyHint, a.IdempotentHint
	if a.DestructiveHint != nil {
		out.Destructive = *a.DestructiveHint
	}
	if a.OpenWorldHint != nil {
		out.OpenWorld = *a.OpenWorldHint
	}
	return out
}

// Caller decides the rules of tool that read no arguments.
func (p *policyRules) Caller(ctx context.Context, info *sdkauth.TokenInfo, tool string) (string, bool) {
	pr, _ := auth.PrincipalFromTokenInfo(info)
	return p.caller(ctx, pr, tool)
}

func (p *policyRules) caller(ctx context.Context, pr *auth.Principal, tool string) (string, bool) {
	if !p.set.HasCallerRules(tool) {
		return "", false
	}
	var in policy.Input
	var c policy.Caller
	p.input(&in, &c, pr, tool, p.original(tool))
	r := p.set.Caller(&in)
	if r == nil {
		return "", false
	}
	p.undecided(ctx, r, tool)
	return r.Rule, r.Hidden
}

// ArgumentRules reports whether a rule reads the arguments of tool's calls.
func (p *policyRules) ArgumentRules(tool string) bool { return p.set.HasArgumentRules(tool) }

// Arguments decides the rules of tool that read the arguments of a call.
func (p *policyRules) Arguments(ctx context.Context, info *sdkauth.TokenInfo, tool, original string, args json.RawMessage) string {
	pr, _ := auth.PrincipalFromTokenInfo(info)
	return p.arguments(ctx, pr, tool, original, args)
}

func (p *policyRules) arguments(ctx context.Context, pr *auth.Principal, tool, original string, args json.RawMessage) string {
	var in policy.Input
	var c policy.Caller
	p.input(&in, &c, pr, tool, original)
	r := p.set.Arguments(&in, args)
	if r == nil {
		return ""
	}
	p.undecided(ctx, r, tool)
	return r.Rule
}

// undecided logs, at Debug, why a rule could not be decided (never an
// argument's value: the errors name keys and types only).
func (p *policyRules) undecided(ctx context.Context, r *policy.Refusal, tool string) {
	if r.Err == nil || !p.logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	p.logger.DebugContext(ctx, "a policy rule could not be decided and refuses", "rule", r.Rule, "tool", truncateName(tool), "server", p.server, "error", r.Err.Error())
}

// truncateName bounds a caller-chosen name in the log.
func truncateName(name string) string {
	if len(name) > maxLoggedName {
		return strings.ToValidUTF8(name[:maxLoggedName], "") + "…"
	}
	return name
}

// maxLoggedName bounds a caller-chosen tool name in the log.
const maxLoggedName = 128
