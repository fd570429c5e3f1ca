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
	"sync"
	"time"

	"cel.dev/cel-go/cel"
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
	// scalar literal (see checkScalars), claimScalarPaths the paths below
	// caller.claims (checkClaimScalars).
	scalarPaths, claimScalarPaths [][]string
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
