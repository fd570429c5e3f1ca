package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/operators"
)

// Compiling: the CEL environment of the four variables, each rule parsed,
// type-checked and bounded in size and estimated cost, and what its
// expression reads (inspect), which decides what a decision decodes.

var (
	callerFields     = []string{"issuer", "subject", "client_id", "scopes", "groups", "claims"}
	toolFields       = []string{"name", "original", "server", "upstream", "annotations"}
	annotationFields = []string{"title", "read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint"}
)

var (
	envOnce sync.Once
	env     *cel.Env
	envErr  error
)

func newEnv() (*cel.Env, error) {
	envOnce.Do(func() {
		env, envErr = cel.NewEnv(
			cel.Variable("caller", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("tool", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("now", cel.TimestampType),
			cel.CrossTypeNumericComparisons(true),
			cel.ParserExpressionSizeLimit(MaxExpressionSize),
			cel.ParserRecursionLimit(MaxNesting),
		)
	})
	return env, envErr
}

// Compile compiles and type-checks specs. The error, when any spec is
// wrong, joins one error per problem, each prefixed with the spec's
// [Spec.Key]. An empty specs compiles to a Set without rules.
func Compile(specs []Spec) (*Set, error) {
	if len(specs) == 0 {
		// No CEL environment: building one costs a start without rules.
		return &Set{}, nil
	}
	e, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	s := &Set{}
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	for _, sp := range specs {
		r, problems := compile(e, sp)
		for _, p := range problems {
			add(sp.Key+".allow", "%s", p)
		}
		if r != nil {
			s.rules = append(s.rules, r)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

func compile(e *cel.Env, sp Spec) (*rule, []string) {
	if strings.TrimSpace(sp.Allow) == "" {
		return nil, []string{"required: a CEL expression that must hold for the call to go on"}
	}
	ast, iss := e.Compile(sp.Allow)
	if iss.Err() != nil {
		var out []string
		src := common.NewTextSource(sp.Allow)
		for _, err := range iss.Errors() {
			// Line and column, the message, and the line with a caret.
			out = append(out, strings.TrimPrefix(strings.TrimSpace(err.ToDisplayString(src)), "ERROR: <input>:"))
		}
		return nil, out
	}
	r := &rule{Spec: sp}
	var problems []string
	r.inspect(ast.NativeRep(), &problems)
	if !ast.OutputType().IsExactType(cel.BoolType) {
		problems = append(problems, fmt.Sprintf("must be a bool, not %s (compare the value: == true, in [...], ...)", ast.OutputType()))
	}
	if len(problems) > 0 {
		return nil, problems
	}
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	if est, err := e.EstimateCost(ast, sizes{}); err != nil || est.Max > CostLimit {
		opts = append(opts, cel.CostLimit(CostLimit))
		r.counted = true
	}
	prg, err := e.Program(ast, opts...)
	if err != nil {
		return nil, []string{err.Error()}
	}
	r.prg = prg
	return r, nil
}

// sizes estimates the size of the variables for the cost estimate of a
// rule: MaxArgumentsSize for args and what is read of it, MaxCallerSize
// for the others.
type sizes struct{}

func (sizes) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

func (sizes) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	path := n.Path()
	if len(path) == 0 {
		return nil
	}
	max := uint64(MaxCallerSize)
	if path[0] == "args" {
		max = MaxArgumentsSize
	}
	return &cost.SizeEstimate{Min: 0, Max: max}
}

// inspect records what the expression reads and checks the fields it
// selects of caller and tool.
func (r *rule) inspect(a *celast.AST, problems *[]string) {
	root := celast.NavigateAST(a)
	for _, n := range celast.MatchDescendants(root, celast.AllMatcher()) {
		switch n.Kind() {
		case celast.IdentKind:
			switch n.AsIdent() {
			case "args":
				r.args = true
			case "caller":
				r.caller = true
			case "tool":
				r.tool = true
			case "now":
				r.now = true
			}
		case celast.SelectKind:
			sel := n.AsSelect()
			field := sel.FieldName()
			r.addName(field)
			r.checkField(sel.Operand(), field, problems)
			if isCallerClaims(sel.Operand()) {
				r.claims = appendNew(r.claims, field)
			}
		case celast.CallKind:
			call := n.AsCall()
			args := call.Args()
			r.recordScalarPath(call)
			switch call.FunctionName() {
			case operators.Index, operators.OptIndex:
				if key, ok := stringLiteral(args[1]); ok {
					r.addName(key)
					r.checkField(args[0], key, problems)
					if isCallerClaims(args[0]) {
						r.claims = appendNew(r.claims, key)
					}
				}
			case operators.In:
				if key, ok := stringLiteral(args[0]); ok {
					r.addName(key)
					if isCallerClaims(args[1]) {
						r.claims = appendNew(r.claims, key)
					}
				}
			}
		}
		// args used in any other way than by the name of an argument:
		// every argument may be read.
		if n.Kind() == celast.IdentKind && n.AsIdent() == "args" {
			parent, ok := n.Parent()
			if name, named := argNamed(parent, n); ok && named {
				r.topArgs = appendNew(r.topArgs, name)
			} else {
				r.allArgs = true
			}
		}
		// caller.claims used in any other way than a field or a literal
		// key of it: every claim may be read.
		if isCallerClaims(n) {
			parent, ok := n.Parent()
			if !ok || !claimsNamed(parent, n) {
				r.allClaims = true
			}
		}
	}
}

func (r *rule) addName(name string) {
	r.names = appendNew(r.names, name)
}

// checkField reports a field of caller, tool or tool.annotations that
// does not exist.
func (r *rule) checkField(operand celast.Expr, field string, problems *[]string) {
	var known []string
	var what string
	switch {
	case operand.Kind() == celast.IdentKind && operand.AsIdent() == "caller":
		known, what = callerFields, "caller"
	case operand.Kind() == celast.IdentKind && operand.AsIdent() == "tool":
		known, what = toolFields, "tool"
	case operand.Kind() == celast.SelectKind && operand.AsSelect().FieldName() == "annotations" &&
		operand.AsSelect().Operand().Kind() == celast.IdentKind && operand.AsSelect().Operand().AsIdent() == "tool":
		known, what = annotationFields, "tool.annotations"
	default:
		return
	}
	if !slices.Contains(known, field) {
		*problems = append(*problems, fmt.Sprintf("%s has no field %q (it has %s)", what, field, strings.Join(known, ", ")))
	}
}

// argNamed returns the argument parent reads of args by its name:
// args.name, has(args.name), args["name"], "name" in args.
func argNamed(parent celast.NavigableExpr, args celast.NavigableExpr) (string, bool) {
	switch parent.Kind() {
	case celast.SelectKind:
		return parent.AsSelect().FieldName(), true
	case celast.CallKind:
		call := parent.AsCall()
		a := call.Args()
		switch call.FunctionName() {
		case operators.Index, operators.OptIndex:
			if name, ok := stringLiteral(a[1]); ok && a[0].ID() == args.ID() {
				return name, true
			}
		case operators.In:
			if name, ok := stringLiteral(a[0]); ok && a[1].ID() == args.ID() {
				return name, true
			}
		}
	}
	return "", false
}

// claimsNamed reports whether parent reads one claim of claims by its
// name: claims.name, has(claims.name), claims["name"], "name" in claims.
func claimsNamed(parent celast.NavigableExpr, claims celast.NavigableExpr) bool {
	switch parent.Kind() {
	case celast.SelectKind:
		return true
	case celast.CallKind:
		call := parent.AsCall()
		args := call.Args()
		switch call.FunctionName() {
		case operators.Index, operators.OptIndex:
			_, ok := stringLiteral(args[1])
			return ok && args[0].ID() == claims.ID()
		case operators.In:
			_, ok := stringLiteral(args[0])
			return ok && args[1].ID() == claims.ID()
		}
	}
	return false
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
