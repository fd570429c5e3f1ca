package auth

import (
	"slices"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
)

// Policy decides which tools a principal may call, and which of the others
// it may see (see [ToolPolicy.Hidden] and the mcp package).
//
// The rule: a tool listed in Options.Policy is allowed when the principal
// holds all of its Scopes, or any one of its Roles (either grants access
// when both are listed); a tool listed with neither, or not listed at all,
// is allowed to every principal the middleware let through (which already
// required Options.RequiredScopes).
type Policy struct {
	tools    map[string]ToolPolicy
	required []string
	// advertise spells scopes as clients ask for them.
	advertise func([]string) []string
}

// NewPolicy builds the policy of o.
func NewPolicy(o Options) *Policy {
	p := &Policy{tools: make(map[string]ToolPolicy, len(o.Policy)), required: o.RequiredScopes, advertise: o.AdvertisedScopes}
	for _, tp := range o.Policy {
		if !tp.IsPattern() {
			p.tools[tp.Tool] = tp
		}
	}
	return p
}

// Allowed reports whether pr may call tool. A nil principal (auth off) may
// call only tools without requirements.
func (p *Policy) Allowed(pr *Principal, tool string) bool {
	tp, ok := p.tools[tool]
	if !ok || (len(tp.Scopes) == 0 && len(tp.Roles) == 0) {
		return true
	}
	if pr == nil {
		return false
	}
	if len(tp.Scopes) > 0 && pr.HasScopes(tp.Scopes...) {
		return true
	}
	return len(tp.Roles) > 0 && pr.HasAnyRole(tp.Roles...)
}

// Needed returns the scopes a call of tool needs: the endpoint's required
// scopes plus the tool's own, spelled as clients ask for them
// ([Options.AdvertisedScopes]). A hidden tool's go to the log only.
func (p *Policy) Needed(tool string) []string {
	out := slices.Clone(p.required)
	for _, s := range p.tools[tool].Scopes {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return p.advertise(out)
}

// Hidden reports whether tool is hidden from the callers its rule refuses
// (see [ToolPolicy.Hidden]).
func (p *Policy) Hidden(tool string) bool {
	tp, ok := p.tools[tool]
	return ok && tp.hidden()
}

// Decide is [Policy.Allowed], [Policy.Needed] and [Policy.Hidden] for the
// SDK's TokenInfo, shaped to be used as mcp.ToolPolicy. A nil info (auth
// off) or one not made by [Middleware] counts as a nil principal: only
// tools without requirements are allowed.
func (p *Policy) Decide(info *sdkauth.TokenInfo, tool string) (allowed bool, needed []string, hidden bool) {
	pr, _ := PrincipalFromTokenInfo(info)
	if p.Allowed(pr, tool) {
		return true, nil, false
	}
	return false, p.Needed(tool), p.Hidden(tool)
}
