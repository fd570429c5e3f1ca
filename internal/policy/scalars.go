package policy

import (
	"fmt"
	"slices"
	"strings"

	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// CEL's equality is heterogeneous: an object or a list is never equal to
// a string, so `args.env != "production"` holds for {"env":
// ["production"]}, which a tool that takes the first element, or joins a
// list, reads as production. A rule that compares an argument with a
// scalar (==, != or in a list of scalars) therefore refuses a call whose
// argument at that path is an object or a list. The same holds for the
// caller's claims: `caller.claims.role != "guest"` refuses a token whose
// role claim is a list or an object (an IdP that sends roles as a list),
// rather than letting every such token through.

// recordScalarPath records the argument or claim path call compares
// with a scalar literal, if it does.
func (r *rule) recordScalarPath(call celast.CallExpr) {
	a := call.Args()
	switch call.FunctionName() {
	case operators.Equals, operators.NotEquals:
		for i, j := range [2]int{1, 0} {
			if isScalarLiteral(a[j]) {
				r.addScalarPath(a[i])
			}
		}
	case operators.In:
		if a[1].Kind() != celast.ListKind {
			return
		}
		for _, e := range a[1].AsList().Elements() {
			if !isScalarLiteral(e) {
				return
			}
		}
		r.addScalarPath(a[0])
	}
}

// addScalarPath records the path e reads below args or caller.claims,
// if it reads one.
func (r *rule) addScalarPath(e celast.Expr) {
	claims, p, ok := scalarPath(e)
	if !ok {
		return
	}
	paths := &r.scalarPaths
	if claims {
		paths = &r.claimScalarPaths
	}
	for _, q := range *paths {
		if slices.Equal(q, p) {
			return
		}
	}
	*paths = append(*paths, p)
}

// isScalarLiteral reports whether e is a string, number, bool or bytes
// literal (null is left out: comparing with null asks whether a value is
// there, whatever it is).
func isScalarLiteral(e celast.Expr) bool {
	if e.Kind() != celast.LiteralKind {
		return false
	}
	switch e.AsLiteral().(type) {
	case types.String, types.Int, types.Uint, types.Double, types.Bool, types.Bytes:
		return true
	}
	return false
}

// scalarPath returns the path of names e reads below args (args.a.b and
// args["a"]["b"] are [a b]) or, with claims set, below caller.claims.
func scalarPath(e celast.Expr) (claims bool, p []string, ok bool) {
	var rev []string
	for {
		if isCallerClaims(e) || (e.Kind() == celast.IdentKind && e.AsIdent() == "args") {
			if len(rev) == 0 {
				return false, nil, false
			}
			slices.Reverse(rev)
			return isCallerClaims(e), rev, true
		}
		switch e.Kind() {
		case celast.SelectKind:
			s := e.AsSelect()
			if s.IsTestOnly() {
				return false, nil, false
			}
			rev = append(rev, s.FieldName())
			e = s.Operand()
		case celast.CallKind:
			c := e.AsCall()
			if c.FunctionName() != operators.Index {
				return false, nil, false
			}
			key, ok := stringLiteral(c.Args()[1])
			if !ok {
				return false, nil, false
			}
			rev = append(rev, key)
			e = c.Args()[0]
		default:
			return false, nil, false
		}
	}
}

// checkScalars returns an error when an argument r compares with a
// scalar is an object or a list. An absent argument is left to the
// rule, which refuses reading it.
func (r *rule) checkScalars(args map[string]any) error {
	return r.checkPaths("argument", r.scalarPaths, args)
}

// checkClaimScalars is checkScalars for the caller's claims (decoded as
// arguments are, see claimsValue).
func (r *rule) checkClaimScalars(claims map[string]any) error {
	return r.checkPaths("claim", r.claimScalarPaths, claims)
}

func (r *rule) checkPaths(what string, paths [][]string, root map[string]any) error {
	for _, p := range paths {
		var v any = root
		for _, name := range p {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[name]
		}
		switch v.(type) {
		case map[string]any:
			return fmt.Errorf("policy: rule %q: %s %s is an object where the rule compares a scalar", r.Name, what, strings.Join(p, "."))
		case []any:
			return fmt.Errorf("policy: rule %q: %s %s is a list where the rule compares a scalar", r.Name, what, strings.Join(p, "."))
		}
	}
	return nil
}

func stringLiteral(e celast.Expr) (string, bool) {
	if e.Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

// isCallerClaims reports whether e is caller.claims.
func isCallerClaims(e celast.Expr) bool {
	if e.Kind() != celast.SelectKind {
		return false
	}
	s := e.AsSelect()
	return s.FieldName() == "claims" && s.Operand().Kind() == celast.IdentKind && s.Operand().AsIdent() == "caller"
}
