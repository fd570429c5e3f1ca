package policy

import (
	"path"
)

// Deciding: the rules that apply to a tool (cached per tool), and the
// two decisions, on the caller and on a call's arguments.

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
