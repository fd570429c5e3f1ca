package policy

import (
	"fmt"
	"testing"
	"time"
)

// tenRules are ten argument rules of the kinds docs/security.md shows.
func tenRules() []Spec {
	exprs := []string{
		`args.database == "analytics"`,
		`!has(args.limit) || args.limit <= 1000`,
		`args.table in ["events", "sessions", "users"]`,
		`!args.query.contains("DROP")`,
		`size(args.query) < 4096`,
		`args.format == "json" || args.format == "csv"`,
		`"analysts" in caller.groups || args.database != "finance"`,
		`caller.claims.department == "data" || args.table != "users"`,
		`tool.server == "" || args.database != "production"`,
		`now.getHours() >= 0 && args.limit >= 1`,
	}
	specs := make([]Spec, len(exprs))
	for i, e := range exprs {
		specs[i] = Spec{Key: fmt.Sprintf("rules[%d]", i), Tool: "query", Name: fmt.Sprintf("rule-%d", i), Allow: e}
	}
	return specs
}

var benchArgs = []byte(`{"database":"analytics","table":"events","query":"SELECT count(*) FROM events WHERE day = today()","limit":100,"format":"json"}`)

// BenchmarkArguments is the CPU the policy adds to a call with ten
// argument rules (see docs/performance.md).
func BenchmarkArguments(b *testing.B) {
	s := mustCompile(b, tenRules()...)
	in := &Input{Caller: analyst, Tool: Tool{Name: "query", Original: "query"}, Now: time.Now()}
	if r := s.Arguments(in, benchArgs); r != nil {
		b.Fatalf("refused by %q: %v", r.Rule, r.Err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if s.Arguments(in, benchArgs) != nil {
			b.Fatal("refused")
		}
	}
}

// BenchmarkCaller is one caller rule decided, as tools/list decides it
// for each tool a rule applies to.
func BenchmarkCaller(b *testing.B) {
	s := mustCompile(b, Spec{Key: "k", Tool: "query", Name: "analysts", Allow: `"analysts" in caller.groups`})
	in := &Input{Caller: analyst, Tool: Tool{Name: "query"}, Now: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		if s.Caller(in) != nil {
			b.Fatal("refused")
		}
	}
}
