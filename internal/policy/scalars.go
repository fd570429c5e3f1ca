package policy

import (
	"fmt"
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
// argument at that path is an object or a list.

// recordScalarPath records the argument path call compares with a scalar
// literal, if it does.
func (r *rule) recordScalarPath(call celast.CallExpr) {
	a := call.Args()
	switch call.FunctionName() {
	case operators.Equals, operators.NotEquals:
		for i, j := range [2]int{1, 0} {
			if isScalarLiteral(a[j]) {
				if p, ok := argPath(a[i]); ok {
					r.addScalarPath(p)
				}
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
		if p, ok := argPath(a[0]); ok {
			r.addScalarPath(p)
		}
	}
}

func (r *rule) addScalarPath(p []string) {
	for _, q := range r.scalarPaths {
		if strings.Join(q, "\x00") == strings.Join(p, "\x00") {
			return
		}
	}
	r.scalarPaths = append(r.scalarPaths, p)
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

// argPath returns the path of names e reads below args: args.a.b and
// args["a"]["b"] are [a b].
func argPath(e celast.Expr) ([]string, bool) {
	var rev []string
	for {
		switch e.Kind() {
		case celast.IdentKind:
			if e.AsIdent() != "args" || len(rev) == 0 {
				return nil, false
			}
			p := make([]string, len(rev))
			for i, n := range rev {
				p[len(rev)-1-i] = n
			}
			return p, true
		case celast.SelectKind:
			s := e.AsSelect()
			if s.IsTestOnly() {
				return nil, false
			}
			rev = append(rev, s.FieldName())
			e = s.Operand()
		case celast.CallKind:
			c := e.AsCall()
			if c.FunctionName() != operators.Index {
				return nil, false
			}
			key, ok := stringLiteral(c.Args()[1])
			if !ok {
				return nil, false
			}
			rev = append(rev, key)
			e = c.Args()[0]
		default:
			return nil, false
		}
	}
}

// checkScalars returns an error when an argument r compares with a
// scalar is an object or a list. An absent argument is left to the
// rule, which refuses reading it.
func (r *rule) checkScalars(args map[string]any) error {
	for _, p := range r.scalarPaths {
		var v any = args
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
			return fmt.Errorf("policy: rule %q: argument %s is an object where the rule compares a scalar", r.Name, strings.Join(p, "."))
		case []any:
			return fmt.Errorf("policy: rule %q: argument %s is a list where the rule compares a scalar", r.Name, strings.Join(p, "."))
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
