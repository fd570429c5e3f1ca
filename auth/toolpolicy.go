package auth

import (
	"strings"
)

// ToolPolicy is what one tool needs. When Scopes and Roles are both listed,
// either grants access: all the Scopes, or any one of the Roles. A tool
// with neither is open to every authenticated caller. Its Rules must hold
// besides.
type ToolPolicy struct {
	// Tool is the tool's name, as tools/list shows it. An entry that
	// lists only rules may name tools by a pattern instead, as a virtual
	// server's selections do ("delete_*": '*' any run of characters, '?'
	// one, [a-z] one of a class); a tool is then held to the rules of
	// every entry that names or matches it.
	Tool string `yaml:"tool" schema:"required"`
	// Scopes are the scopes a token needs, all of them, to call the tool.
	Scopes []string `yaml:"scopes"`
	// Roles grant the call too: any one of them (from auth.roles_claims).
	Roles []string `yaml:"roles"`
	// Hidden hides the tool from callers the rule refuses: tools/list
	// leaves it out and a call of it is answered as a call of a tool that
	// does not exist, so its existence and what it needs do not leak; but
	// a client cannot learn that more scopes would let it in. Not hidden,
	// the tool is listed to every caller, and a call without its scopes
	// gets the spec's step-up answer: 403 with WWW-Authenticate error
	// "insufficient_scope" naming the scopes, so that the client can ask
	// the user to grant them. Default: false for a rule that names scopes,
	// true for one that names only roles (no re-authorization grants a
	// role). Over stdio, which carries no token, refused tools are always
	// hidden. The same holds for a rule of Rules that reads no arguments:
	// hidden, a tool it refuses a caller is left out of the caller's
	// tools/list and answered as an unknown tool; not hidden, it is
	// listed and a call is refused naming the rule.
	Hidden *bool `yaml:"hidden"`
	// Rules are expressions that must all hold for a call of the tool to
	// go on, in CEL (the Common Expression Language), over the caller,
	// the tool, the call's arguments and the time: see
	// docs/security.md. A rule that reads no arguments also decides what
	// tools/list shows the caller; one that reads them decides each
	// call. A rule that cannot be decided (a claim the token lacks, an
	// argument of another type) refuses. A refusal names the rule,
	// never its expression.
	Rules []PolicyRule `yaml:"rules"`
}

// PolicyRule is one expression rule of a tool's policy.
type PolicyRule struct {
	// Name names the rule in refusals, logs and audit events: letters,
	// digits, '-', '_' and '.', at most 64, unique in its policy.
	Name string `yaml:"name" schema:"required"`
	// Allow is a CEL expression of type bool over caller, tool, args and
	// now that must hold, such as args.database == "analytics". It is
	// compiled and type-checked at start, at most 4096 characters.
	Allow string `yaml:"allow" schema:"required"`
}

// MaxRuleName is the longest name of a [PolicyRule].
const MaxRuleName = 64

// validRuleName reports whether s may name a rule.
func validRuleName(s string) bool {
	if s == "" || len(s) > MaxRuleName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// IsPattern reports whether the entry names tools by a pattern: its Tool
// holds '*', '?', '[' or '\'.
func (tp ToolPolicy) IsPattern() bool { return strings.ContainsAny(tp.Tool, `*?[\`) }

// Hides reports whether the entry hides its tool from the callers it
// refuses (see [ToolPolicy.Hidden]), its default applied.
func (tp ToolPolicy) Hides() bool { return tp.hidden() }

// hidden reports whether the rule hides its tool from callers it refuses.
func (tp ToolPolicy) hidden() bool {
	if tp.Hidden != nil {
		return *tp.Hidden
	}
	return len(tp.Scopes) == 0
}
