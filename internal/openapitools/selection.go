package openapitools

import (
	"path"
	"strconv"
	"strings"
)

// Selection says which operations of a document are served. Each field
// that is set narrows the selection: an operation is selected when it
// matches one entry of every field that is set (so Tags and Methods
// together select the operations of those tags with those methods). The
// zero Selection selects nothing: a document's operations are never all
// served by default. Paths: ["/**"] selects every operation.
type Selection struct {
	// OperationIDs are operationId values, compared exactly.
	OperationIDs []string
	// Tags are tag names, compared exactly.
	Tags []string
	// Paths are globs over the document's path templates, server prefix
	// not included: "*" matches within one segment, "**" any number of
	// whole segments (so "/pets/**" matches "/pets" and
	// "/pets/{petId}/photos"), and the rest as in path.Match, where
	// "{petId}" is literal text.
	Paths []string
	// Methods are HTTP methods, in any letter case.
	Methods []string
}

// IsZero reports whether the selection sets no field, and so selects
// nothing.
func (s Selection) IsZero() bool {
	return len(s.OperationIDs) == 0 && len(s.Tags) == 0 && len(s.Paths) == 0 && len(s.Methods) == 0
}

// selector matches operations against a Selection and remembers which of
// its entries matched an operation of the document, so that the ones that
// match none can be reported (most likely a typo).
type selector struct {
	sel  Selection
	used map[string]bool // "id:x", "tag:x", "path:x", "method:x"
}

func newSelector(sel Selection) *selector {
	return &selector{sel: sel, used: map[string]bool{}}
}

// match reports whether the operation is selected. It marks the entries
// that match, field by field, whether or not the other fields do.
func (s *selector) match(id string, tags []string, pathTemplate, method string) bool {
	if s.sel.IsZero() {
		return false
	}
	ok := true
	field := func(entries []string, kind string, matches func(string) bool) {
		if len(entries) == 0 {
			return
		}
		hit := false
		for _, e := range entries {
			if matches(e) {
				s.used[kind+e] = true
				hit = true
			}
		}
		ok = ok && hit
	}
	field(s.sel.OperationIDs, "id:", func(e string) bool { return id != "" && e == id })
	field(s.sel.Tags, "tag:", func(e string) bool {
		for _, t := range tags {
			if t == e {
				return true
			}
		}
		return false
	})
	field(s.sel.Paths, "path:", func(e string) bool { return globMatch(e, pathTemplate) })
	field(s.sel.Methods, "method:", func(e string) bool { return strings.EqualFold(e, method) })
	return ok
}

// unused returns a problem for each entry of the selection that matched
// no operation of the document, and for each path glob that is malformed.
func (s *selector) unused() []Problem {
	var out []Problem
	report := func(entries []string, kind, what string) {
		for _, e := range entries {
			if !s.used[kind+e] {
				out = append(out, Problem{Message: what + " " + quote(e) + " matches no operation of the document"})
			}
		}
	}
	report(s.sel.OperationIDs, "id:", "operationId")
	report(s.sel.Tags, "tag:", "tag")
	for _, p := range s.sel.Paths {
		if !validGlob(p) {
			out = append(out, Problem{Message: "path glob " + quote(p) + " is malformed"})
		} else if !s.used["path:"+p] {
			out = append(out, Problem{Message: "path glob " + quote(p) + " matches no operation of the document"})
		}
	}
	for _, m := range s.sel.Methods {
		if !knownMethod(strings.ToUpper(m)) {
			out = append(out, Problem{Message: "method " + quote(m) + " is not an HTTP method an operation can have"})
		} else if !s.used["method:"+m] {
			out = append(out, Problem{Message: "method " + quote(m) + " matches no operation of the document"})
		}
	}
	return out
}

// methods are the methods a path item may hold operations for, in the
// order operations are listed.
var methods = []string{"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE"}

func knownMethod(m string) bool {
	for _, k := range methods {
		if k == m {
			return true
		}
	}
	return false
}

// globMatch reports whether the path template p matches the glob g, segment by
// segment, "**" matching any number of whole segments.
func globMatch(g, p string) bool {
	return segmentsMatch(strings.Split(g, "/"), strings.Split(p, "/"))
}

func segmentsMatch(g, p []string) bool {
	for len(g) > 0 {
		if g[0] == "**" {
			for i := 0; i <= len(p); i++ {
				if segmentsMatch(g[1:], p[i:]) {
					return true
				}
			}
			return false
		}
		if len(p) == 0 {
			return false
		}
		if ok, err := path.Match(g[0], p[0]); err != nil || !ok {
			return false
		}
		g, p = g[1:], p[1:]
	}
	return len(p) == 0
}

func validGlob(g string) bool {
	for _, seg := range strings.Split(g, "/") {
		if _, err := path.Match(seg, ""); err != nil {
			return false
		}
	}
	return true
}

func quote(s string) string { return strconv.Quote(s) }
