package policy

import (
	"encoding/json"
	"fmt"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
)

// Evaluating: a decision's variables as CEL's interpreter reads them,
// built field by field on demand, and a rule evaluated on them.

func evalAll(rules []*rule, act *activation) *Refusal {
	for _, r := range rules {
		if ref := eval(r, act); ref != nil {
			return ref
		}
	}
	return nil
}

// eval decides r: nil when it holds.
func eval(r *rule, act *activation) *Refusal {
	if len(r.claimScalarPaths) > 0 {
		if err := r.checkClaimScalars(act.caller.claimMap()); err != nil {
			return &Refusal{Rule: r.Name, Hidden: r.Hidden, Err: err}
		}
	}
	out, _, err := r.prg.Eval(act)
	if err != nil {
		return &Refusal{Rule: r.Name, Hidden: r.Hidden, Err: fmt.Errorf("policy: rule %q: %w", r.Name, err)}
	}
	if b, ok := out.(types.Bool); !ok || !bool(b) {
		if !ok {
			return &Refusal{Rule: r.Name, Hidden: r.Hidden, Err: fmt.Errorf("policy: rule %q: not a bool: %v", r.Name, out.Type())}
		}
		return &Refusal{Rule: r.Name, Hidden: r.Hidden}
	}
	return nil
}

// activation holds the variables of one decision. caller and tool are
// read field by field (CEL's interpreter asks FindStringKey), so a
// decision builds no map for them.
type activation struct {
	caller callerValue
	tool   toolValue
	args   map[string]any
	now    time.Time
	// The caller and the tool, copied: the decision's input stays the
	// caller's, and can live on its stack.
	c Caller
	t Tool
}

func newActivation(tr *toolRules, in *Input) *activation {
	a := &activation{now: in.Now, args: emptyArgs, t: in.Tool}
	if in.Caller != nil {
		a.c = *in.Caller
	}
	a.caller = callerValue{c: &a.c, tr: tr}
	a.tool = toolValue{t: &a.t}
	return a
}

var emptyArgs = map[string]any{}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "caller":
		return &a.caller, true
	case "tool":
		return &a.tool, true
	case "args":
		return a.args, true
	case "now":
		return types.Timestamp{Time: a.now}, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// callerValue is the variable caller.
type callerValue struct {
	c      *Caller
	tr     *toolRules
	claims map[string]any // made on first use
}

// FindStringKey returns the field k of caller.
func (v *callerValue) FindStringKey(k string) (any, bool) {
	switch k {
	case "issuer":
		return v.c.Issuer, true
	case "subject":
		return v.c.Subject, true
	case "client_id":
		return v.c.ClientID, true
	case "scopes":
		return orEmpty(v.c.Scopes), true
	case "groups":
		return orEmpty(v.c.Groups), true
	case "claims":
		return v.claimMap(), true
	}
	return nil, false
}

// claimMap returns the claims the rules read, decoded on first use.
func (v *callerValue) claimMap() map[string]any {
	if v.claims == nil {
		v.claims = claimsValue(v.c, v.tr)
	}
	return v.claims
}

// claimsValue decodes the claims the rules of tr read.
func claimsValue(c *Caller, tr *toolRules) map[string]any {
	claims := make(map[string]any, len(tr.claims))
	if tr.allClaims {
		for name, raw := range c.Claims {
			if v, ok := claimValue(raw); ok {
				claims[name] = v
			}
		}
		return claims
	}
	for _, name := range tr.claims {
		if raw, ok := c.Claims[name]; ok {
			if v, ok := claimValue(raw); ok {
				claims[name] = v
			}
		}
	}
	return claims
}

// toolValue is the variable tool.
type toolValue struct{ t *Tool }

// FindStringKey returns the field k of tool.
func (v *toolValue) FindStringKey(k string) (any, bool) {
	switch k {
	case "name":
		return v.t.Name, true
	case "original":
		return v.t.Original, true
	case "server":
		return v.t.Server, true
	case "upstream":
		return v.t.Upstream, true
	case "annotations":
		return (*annotationsValue)(&v.t.Annotations), true
	}
	return nil, false
}

// annotationsValue is the variable tool.annotations.
type annotationsValue Annotations

// FindStringKey returns the field k of tool.annotations.
func (v *annotationsValue) FindStringKey(k string) (any, bool) {
	switch k {
	case "title":
		return v.Title, true
	case "read_only_hint":
		return v.ReadOnly, true
	case "destructive_hint":
		return v.Destructive, true
	case "idempotent_hint":
		return v.Idempotent, true
	case "open_world_hint":
		return v.OpenWorld, true
	}
	return nil, false
}

// claimValue decodes a claim as arguments are decoded; a claim that does
// not decode is left out.
func claimValue(raw json.RawMessage) (any, bool) {
	d := decoder{data: raw, names: &argNames{all: true}}
	v, err := d.value(0)
	if err != nil {
		return nil, false
	}
	d.skipSpace()
	return v, d.pos == len(d.data)
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
