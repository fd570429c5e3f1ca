// Package policy evaluates the expression rules of a policy: CEL
// (Common Expression Language) expressions over the caller, the tool, the
// call's arguments and the time, each of which must hold for a call to go
// on.
//
// Rules are compiled and type-checked once ([Compile]), every problem
// reported at once under its configuration key; each is bounded in size
// and in the cost of one evaluation, so that no rule can stall a call.
// A rule that fails to evaluate refuses (fail closed), as does one whose
// arguments cannot be read unambiguously (see decodeArguments).
//
// A rule that reads no arguments is a caller rule: it can be decided
// before a call, for every tool a caller lists, and so also decides what
// tools/list shows ([Set.Caller]). A rule that reads args is decided on
// each call ([Set.Arguments]).
//
// The variables:
//
//	caller  issuer, subject, client_id (strings), scopes, groups (lists of
//	        strings), claims (the token's claims, by name)
//	tool    name (as the caller calls it), original (as the catalog names
//	        it), server (the virtual server, "" for /mcp), upstream (""
//	        for a tool of Portcullis's own), annotations (title,
//	        read_only_hint, destructive_hint, idempotent_hint,
//	        open_world_hint, with MCP's defaults for hints left unset)
//	args    the call's arguments, after a virtual server's fixed
//	        arguments and defaults are applied
//	now     the time of the call (a timestamp)
package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
)

// Limits on one rule.
const (
	// MaxExpressionSize is the longest expression, in code points.
	MaxExpressionSize = 4096
	// MaxNesting bounds the nesting of an expression's syntax.
	MaxNesting = 32
	// CostLimit bounds the cost of one evaluation of one rule (CEL's
	// runtime cost: about one unit per operation, plus the size of the
	// strings and lists an operation scans). A rule that would exceed it
	// stops there and refuses the call.
	CostLimit = 100_000
	// MaxArgumentsSize and MaxCallerSize are the sizes (bytes, list
	// elements) the cost of a rule is estimated for at start: arguments
	// as large as a request body may be, a caller's token and tool as
	// large as a token may be. A rule whose estimate stays within
	// CostLimit is evaluated without counting its cost; the others count
	// it and stop at CostLimit.
	MaxArgumentsSize = 16 << 20
	MaxCallerSize    = 64 << 10
)

// Spec is one rule as configured.
type Spec struct {
	// Key is where the rule is configured (auth.policy[0].rules[1]), for
	// the problems [Compile] reports.
	Key string
	// Tool is the name of the tool the rule applies to as callers call
	// it, or a pattern as path.Match takes it ("delete_*").
	Tool string
	// Name names the rule in a refusal and in the audit trail.
	Name string
	// Allow is the CEL expression, of type bool, that must hold.
	Allow string
	// Hidden hides the tool from callers a caller rule refuses (as a
	// tool the policy's scopes or roles refuse is hidden): tools/list
	// leaves it out and a call is answered as a call of an unknown tool.
	Hidden bool
}

// Caller is who calls: a verified token's principal.
type Caller struct {
	Issuer, Subject, ClientID string
	Scopes, Groups            []string
	// Claims are the token's claims, as JSON.
	Claims map[string]json.RawMessage
}

// Tool is the tool called, as the variable tool shows it.
type Tool struct {
	Name, Original, Server, Upstream string
	Annotations                      Annotations
}

// Annotations are a tool's MCP annotations, with MCP's defaults for the
// hints it leaves unset (not read-only, destructive, not idempotent,
// open world).
type Annotations struct {
	Title                                        string
	ReadOnly, Destructive, Idempotent, OpenWorld bool
}

// Input is what a rule is decided on, besides the arguments.
type Input struct {
	// Caller is nil when the call carries no token (auth off, stdio):
	// then caller's strings are empty and its lists and claims empty.
	Caller *Caller
	Tool   Tool
	Now    time.Time
}

// Refusal is a rule that refused.
type Refusal struct {
	// Rule is the rule's name.
	Rule string
	// Hidden is the rule's [Spec.Hidden].
	Hidden bool
	// Err is why the rule could not be decided (it refuses then), nil
	// when it evaluated to false.
	Err error
}

// Set is a compiled policy's rules. Its methods are safe for concurrent
// use.
type Set struct {
	rules []*rule
	// byTool caches, per tool name asked about, the rules that apply.
	// Only registered tools are asked about, so it stays bounded.
	byTool sync.Map // string → *toolRules
}

type rule struct {
	Spec
	prg cel.Program
	// What the expression reads.
	args, caller, tool, now bool
	// claims are the claims the expression names; allClaims is set when
	// it reads caller.claims otherwise (iterates, indexes by a variable).
	claims    []string
	allClaims bool
	// counted is set when the rule's cost is counted as it evaluates: its
	// estimate exceeds CostLimit.
	counted bool
	// names are the argument names (field selections and literal keys)
	// the expression reads, for the folding check of decodeArguments.
	names []string
	// topArgs are the arguments the expression reads by name (args.x,
	// args["x"], "x" in args); allArgs is set when it reads args
	// otherwise (iterates it, indexes it by a variable), and then every
	// argument is decoded.
	topArgs []string
	allArgs bool
	// scalarPaths are the argument paths the expression compares with a
	// scalar literal (see checkScalars).
	scalarPaths [][]string
}

// toolRules are the rules that apply to one tool, in configuration order.
type toolRules struct {
	caller, args []*rule
	// What the rules read, together.
	usesCaller, usesTool bool
	claims               []string
	allClaims            bool
	// What decodeArguments needs: the names the rules read, keyed by
	// their fold key, and the arguments to decode (nil: all).
	names *argNames
}

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
				}
			case operators.In:
				if key, ok := stringLiteral(args[0]); ok {
					r.addName(key)
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

// isCallerClaims reports whether e is caller.claims.
func isCallerClaims(e celast.Expr) bool {
	if e.Kind() != celast.SelectKind {
		return false
	}
	s := e.AsSelect()
	return s.FieldName() == "claims" && s.Operand().Kind() == celast.IdentKind && s.Operand().AsIdent() == "caller"
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

func stringLiteral(e celast.Expr) (string, bool) {
	if e.Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// Len returns the number of rules in s.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// rulesFor returns the rules that apply to tool.
func (s *Set) rulesFor(tool string) *toolRules {
	if v, ok := s.byTool.Load(tool); ok {
		return v.(*toolRules)
	}
	tr := &toolRules{}
	var names, top []string
	allArgs := false
	for _, r := range s.rules {
		if !matchTool(r.Tool, tool) {
			continue
		}
		if r.args {
			tr.args = append(tr.args, r)
		} else {
			tr.caller = append(tr.caller, r)
		}
		tr.usesCaller = tr.usesCaller || r.caller
		tr.usesTool = tr.usesTool || r.tool
		tr.allClaims = tr.allClaims || r.allClaims
		for _, c := range r.claims {
			tr.claims = appendNew(tr.claims, c)
		}
		for _, n := range r.names {
			names = appendNew(names, n)
		}
		if r.args {
			for _, n := range r.topArgs {
				top = appendNew(top, n)
			}
			allArgs = allArgs || r.allArgs
		}
	}
	if allArgs {
		top = nil
	}
	tr.names = newArgNames(names, top, allArgs)
	v, _ := s.byTool.LoadOrStore(tool, tr)
	return v.(*toolRules)
}

// matchTool reports whether name matches pattern, as path.Match does
// (the patterns of virtual servers' selections): '*' any run of
// characters, '?' one, [a-z] one of a class. A malformed pattern, which
// the configuration refuses, matches nothing.
func matchTool(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return ok && err == nil
}

// Governs reports whether any rule applies to tool.
func (s *Set) Governs(tool string) bool {
	if s.Len() == 0 {
		return false
	}
	tr := s.rulesFor(tool)
	return len(tr.caller) > 0 || len(tr.args) > 0
}

// HasArgumentRules reports whether a rule that reads arguments applies to
// tool: only then do calls of it need [Set.Arguments].
func (s *Set) HasArgumentRules(tool string) bool {
	return s.Len() > 0 && len(s.rulesFor(tool).args) > 0
}

// Caller decides the caller rules of in.Tool.Name: nil when every one
// holds, else the first that refused.
func (s *Set) Caller(in *Input) *Refusal {
	if s.Len() == 0 {
		return nil
	}
	tr := s.rulesFor(in.Tool.Name)
	if len(tr.caller) == 0 {
		return nil
	}
	act := newActivation(tr, in)
	return evalAll(tr.caller, act)
}

// HasCallerRules reports whether a rule that reads no arguments applies
// to tool: only then does [Set.Caller] decide anything.
func (s *Set) HasCallerRules(tool string) bool {
	return s.Len() > 0 && len(s.rulesFor(tool).caller) > 0
}

// Arguments decides the argument rules of in.Tool.Name on a call with
// args (JSON; the arguments as the tool receives them): nil when every
// one holds, else the first that refused. Arguments that cannot be read
// unambiguously refuse with the first argument rule's name.
func (s *Set) Arguments(in *Input, args []byte) *Refusal {
	if s.Len() == 0 {
		return nil
	}
	tr := s.rulesFor(in.Tool.Name)
	if len(tr.args) == 0 {
		return nil
	}
	decoded, err := decodeArguments(args, tr.names)
	if err != nil {
		return &Refusal{Rule: tr.args[0].Name, Hidden: false, Err: err}
	}
	act := newActivation(tr, in)
	act.args = decoded
	for _, r := range tr.args {
		if err := r.checkScalars(decoded); err != nil {
			return &Refusal{Rule: r.Name, Hidden: r.Hidden, Err: err}
		}
		if ref := eval(r, act); ref != nil {
			return ref
		}
	}
	return nil
}

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
		if v.claims == nil {
			v.claims = claimsValue(v.c, v.tr)
		}
		return v.claims, true
	}
	return nil, false
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
