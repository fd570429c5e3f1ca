package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func mustCompile(t testing.TB, specs ...Spec) *Set {
	t.Helper()
	s, err := Compile(specs)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

func TestCompileReportsEveryProblemWithItsKey(t *testing.T) {
	_, err := Compile([]Spec{
		{Key: "auth.policy[0].rules[0]", Tool: "a", Name: "syntax", Allow: "args.x ==="},
		{Key: "auth.policy[0].rules[1]", Tool: "a", Name: "not-bool", Allow: `args.x`},
		{Key: "auth.policy[1].rules[0]", Tool: "b", Name: "typo", Allow: `caller.subjet == "x"`},
		{Key: "auth.policy[1].rules[1]", Tool: "b", Name: "tool-typo", Allow: `tool.annotations.readonly`},
		{Key: "auth.policy[2].rules[0]", Tool: "c", Name: "empty", Allow: "  "},
		{Key: "auth.policy[2].rules[1]", Tool: "c", Name: "unknown-var", Allow: `request.x == 1`},
		{Key: "auth.policy[2].rules[2]", Tool: "c", Name: "ok", Allow: `args.x == 1`},
	})
	if err == nil {
		t.Fatal("Compile: no error")
	}
	for _, want := range []string{
		"auth.policy[0].rules[0].allow: ",
		"auth.policy[0].rules[1].allow: must be a bool",
		`auth.policy[1].rules[0].allow: caller has no field "subjet"`,
		`auth.policy[1].rules[1].allow: tool.annotations has no field "readonly"`,
		"auth.policy[2].rules[0].allow: required",
		"auth.policy[2].rules[1].allow: ",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "rules[2]") {
		t.Errorf("a valid rule is reported:\n%v", err)
	}
}

func TestCompileLimits(t *testing.T) {
	long := "args.x == \"" + strings.Repeat("a", MaxExpressionSize) + "\""
	deep := strings.Repeat("(", MaxNesting+5) + "true" + strings.Repeat(")", MaxNesting+5)
	for _, expr := range []string{long, deep} {
		if _, err := Compile([]Spec{{Key: "k", Tool: "t", Name: "n", Allow: expr}}); err == nil {
			t.Errorf("Compile(%.40q…): no error", expr)
		}
	}
}

var analyst = &Caller{
	Issuer: "https://idp.example", Subject: "alice", ClientID: "cli",
	Scopes: []string{"mcp"}, Groups: []string{"analysts"},
	Claims: map[string]json.RawMessage{"department": []byte(`"finance"`), "level": []byte(`3`)},
}

func TestCallerRules(t *testing.T) {
	s := mustCompile(t,
		Spec{Key: "k0", Tool: "query", Name: "analysts", Allow: `"analysts" in caller.groups`, Hidden: true},
		Spec{Key: "k1", Tool: "delete_*", Name: "oncall", Allow: `"oncall" in caller.groups`},
		Spec{Key: "k2", Tool: "report", Name: "finance", Allow: `caller.claims.department == "finance" && caller.claims.level >= 2`},
		Spec{Key: "k3", Tool: "hours", Name: "working-hours", Allow: `now.getHours() >= 9 && now.getHours() < 18`},
		Spec{Key: "k4", Tool: "costcenter", Name: "claim-missing", Allow: `caller.claims.cost_center == "42"`},
		Spec{Key: "k5", Tool: "ro", Name: "read-only", Allow: `tool.annotations.read_only_hint && tool.upstream == "" && tool.original == "ro"`},
		Spec{Key: "k6", Tool: "members", Name: "not-guest", Allow: `caller.claims.role != "guest"`},
		Spec{Key: "k7", Tool: "tiers", Name: "paid-tier", Allow: `caller.claims["plan"].tier in ["gold", "silver"]`},
		Spec{Key: "k8", Tool: "indexed", Name: "indexed-claim", Allow: `"department" in caller.claims && caller.claims["department"] == "finance"`},
	)
	withClaims := func(claims ...string) *Caller {
		c := &Caller{Subject: "carol", Claims: map[string]json.RawMessage{}}
		for i := 0; i < len(claims); i += 2 {
			c.Claims[claims[i]] = json.RawMessage(claims[i+1])
		}
		return c
	}
	noon := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	night := time.Date(2026, 1, 5, 23, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		caller   *Caller
		tool     Tool
		now      time.Time
		wantRule string
		wantErr  bool
	}{
		{name: "group held", caller: analyst, tool: Tool{Name: "query"}},
		{name: "group lacking", caller: &Caller{Subject: "bob"}, tool: Tool{Name: "query"}, wantRule: "analysts"},
		{name: "no caller", tool: Tool{Name: "query"}, wantRule: "analysts"},
		{name: "pattern", caller: analyst, tool: Tool{Name: "delete_table"}, wantRule: "oncall"},
		{name: "pattern other tool", caller: analyst, tool: Tool{Name: "undelete_table"}},
		{name: "claims", caller: analyst, tool: Tool{Name: "report"}},
		{name: "claim lacking", caller: &Caller{Subject: "bob"}, tool: Tool{Name: "report"}, wantRule: "finance", wantErr: true},
		{name: "claim lacking everywhere", caller: analyst, tool: Tool{Name: "costcenter"}, wantRule: "claim-missing", wantErr: true},
		{name: "working hours", caller: analyst, tool: Tool{Name: "hours"}, now: noon},
		{name: "after hours", caller: analyst, tool: Tool{Name: "hours"}, now: night, wantRule: "working-hours"},
		{name: "annotations", tool: Tool{Name: "ro", Original: "ro", Annotations: Annotations{ReadOnly: true}}},
		{name: "annotations refuse", tool: Tool{Name: "ro", Original: "ro"}, wantRule: "read-only"},
		{name: "ungoverned", tool: Tool{Name: "other"}},
		{name: "scalar claim compared", caller: withClaims("role", `"member"`), tool: Tool{Name: "members"}},
		{name: "scalar claim refused", caller: withClaims("role", `"guest"`), tool: Tool{Name: "members"}, wantRule: "not-guest"},
		{name: "list claim where != compares a scalar", caller: withClaims("role", `["guest"]`), tool: Tool{Name: "members"}, wantRule: "not-guest", wantErr: true},
		{name: "object claim where != compares a scalar", caller: withClaims("role", `{"name":"guest"}`), tool: Tool{Name: "members"}, wantRule: "not-guest", wantErr: true},
		{name: "nested scalar claim in a list", caller: withClaims("plan", `{"tier":"gold"}`), tool: Tool{Name: "tiers"}},
		{name: "claims by a literal key", caller: analyst, tool: Tool{Name: "indexed"}},
		{name: "claims by a literal key, absent", caller: withClaims("role", `"member"`), tool: Tool{Name: "indexed"}, wantRule: "indexed-claim"},
		{name: "nested list claim where in compares scalars", caller: withClaims("plan", `{"tier":["gold"]}`), tool: Tool{Name: "tiers"}, wantRule: "paid-tier", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.Caller(&Input{Caller: tt.caller, Tool: tt.tool, Now: tt.now})
			switch {
			case tt.wantRule == "" && r != nil:
				t.Fatalf("refused by %q (%v)", r.Rule, r.Err)
			case tt.wantRule != "" && r == nil:
				t.Fatalf("allowed, want refused by %q", tt.wantRule)
			case r != nil && (r.Rule != tt.wantRule || (r.Err != nil) != tt.wantErr):
				t.Fatalf("refused by %q (err %v), want %q (err %v)", r.Rule, r.Err, tt.wantRule, tt.wantErr)
			}
		})
	}
	if r := s.Caller(&Input{Tool: Tool{Name: "query"}}); r == nil || !r.Hidden {
		t.Errorf("a hidden rule's refusal is not hidden: %+v", r)
	}
	if s.HasArgumentRules("query") || !s.Governs("query") || s.Governs("other") {
		t.Error("Governs or HasArgumentRules wrong")
	}
}

func TestArgumentRules(t *testing.T) {
	s := mustCompile(t,
		Spec{Key: "k0", Tool: "query", Name: "analytics-only", Allow: `args.database == "analytics"`},
		Spec{Key: "k1", Tool: "query", Name: "small", Allow: `!has(args.limit) || args.limit <= 100`},
		Spec{Key: "k2", Tool: "nested", Name: "nested", Allow: `args.target.env != "production"`},
		Spec{Key: "k3", Tool: "query", Name: "caller-only", Allow: `caller.subject != "mallory"`},
		Spec{Key: "k4", Tool: "deploy", Name: "not-prod", Allow: `args.env != "production" && !(args.target.region in ["eu-prod", "us-prod"])`},
		Spec{Key: "k5", Tool: "divide", Name: "divisor", Allow: `100 / args.by > 1`},
	)
	in := &Input{Caller: analyst, Tool: Tool{Name: "query"}}
	tests := []struct {
		name     string
		tool     string
		args     string
		wantRule string // empty: allowed
		wantErr  bool
	}{
		{name: "allowed", args: `{"database":"analytics","limit":5}`},
		{name: "allowed without the optional", args: `{"database":"analytics"}`},
		{name: "float limit", args: `{"database":"analytics","limit":5.5}`},
		{name: "other database", args: `{"database":"prod"}`, wantRule: "analytics-only"},
		{name: "too many", args: `{"database":"analytics","limit":1000}`, wantRule: "small"},
		{name: "missing", args: `{}`, wantRule: "analytics-only", wantErr: true},
		{name: "null", args: `null`, wantRule: "analytics-only", wantErr: true},
		{name: "absent", args: ``, wantRule: "analytics-only", wantErr: true},
		{name: "not an object", args: `["analytics"]`, wantRule: "analytics-only", wantErr: true},
		// Attacks: each refused.
		{name: "case", args: `{"Database":"prod"}`, wantRule: "analytics-only", wantErr: true},
		{name: "case beside the real one", args: `{"database":"analytics","DATABASE":"prod"}`, wantRule: "analytics-only", wantErr: true},
		{name: "unicode folding", args: `{"databaſe":"prod","database":"analytics"}`, wantRule: "analytics-only", wantErr: true},
		{name: "kelvin sign", args: `{"database":"analytics","limit":5,"\u212aey":1,"key":2}`, wantRule: "analytics-only", wantErr: true},
		{name: "duplicate key", args: `{"database":"analytics","database":"prod"}`, wantRule: "analytics-only", wantErr: true},
		{name: "duplicate key escaped", args: `{"database":"analytics","d\u0061tabase":"prod"}`, wantRule: "analytics-only", wantErr: true},
		{name: "number as string", args: `{"database":"analytics","limit":"5"}`, wantRule: "small", wantErr: true},
		{name: "object for a scalar", args: `{"database":{"name":"analytics"}}`, wantRule: "analytics-only", wantErr: true},
		{name: "array for a scalar", args: `{"database":["analytics"]}`, wantRule: "analytics-only", wantErr: true},
		{name: "invalid utf-8", args: "{\"database\":\"analytics\xff\"}", wantRule: "analytics-only", wantErr: true},
		{name: "trailing data", args: `{"database":"analytics"} {}`, wantRule: "analytics-only", wantErr: true},
		{name: "an argument no rule reads", args: `{"database":"analytics","blob":{"a":[1,{"b":"}],\""}],"c":"\\"},"n":-1.5e3,"t":true}`},
		{name: "an argument no rule reads, twice", args: `{"database":"analytics","other":{"x":1},"other":2}`, wantRule: "analytics-only", wantErr: true},
		{name: "an argument no rule reads, in two cases", args: `{"database":"analytics","other":1,"OTHER":2}`, wantRule: "analytics-only", wantErr: true},
		{name: "nested allowed", tool: "nested", args: `{"target":{"env":"staging"}}`},
		{name: "nested refused", tool: "nested", args: `{"target":{"env":"production"}}`, wantRule: "nested"},
		{name: "nested case", tool: "nested", args: `{"target":{"env":"staging","ENV":"production"}}`, wantRule: "nested", wantErr: true},
		{name: "nested scalar for an object", tool: "nested", args: `{"target":"production"}`, wantRule: "nested", wantErr: true},
		{name: "not equal, allowed", tool: "deploy", args: `{"env":"staging","target":{"region":"eu-test"}}`},
		{name: "not equal, refused", tool: "deploy", args: `{"env":"production","target":{"region":"eu-test"}}`, wantRule: "not-prod"},
		{name: "list where != expects a scalar", tool: "deploy", args: `{"env":["production"],"target":{"region":"eu-test"}}`, wantRule: "not-prod", wantErr: true},
		{name: "object where != expects a scalar", tool: "deploy", args: `{"env":{"name":"production"},"target":{"region":"eu-test"}}`, wantRule: "not-prod", wantErr: true},
		{name: "nested list where in expects a scalar", tool: "deploy", args: `{"env":"staging","target":{"region":["eu-prod"]}}`, wantRule: "not-prod", wantErr: true},
		{name: "expression error", tool: "divide", args: `{"by":0}`, wantRule: "divisor", wantErr: true},
		{name: "expression holds", tool: "divide", args: `{"by":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := *in
			if tt.tool != "" {
				in.Tool.Name = tt.tool
			}
			r := s.Arguments(&in, []byte(tt.args))
			switch {
			case tt.wantRule == "" && r != nil:
				t.Fatalf("refused by %q (%v)", r.Rule, r.Err)
			case tt.wantRule != "" && r == nil:
				t.Fatalf("allowed, want refused by %q", tt.wantRule)
			case r != nil && (r.Rule != tt.wantRule || (r.Err != nil) != tt.wantErr):
				t.Fatalf("refused by %q (err %v), want %q (err %v)", r.Rule, r.Err, tt.wantRule, tt.wantErr)
			}
		})
	}
	if !s.HasArgumentRules("query") || s.HasArgumentRules("other") {
		t.Error("HasArgumentRules wrong")
	}
	if r := s.Caller(&Input{Caller: &Caller{Subject: "mallory"}, Tool: Tool{Name: "query"}}); r == nil || r.Rule != "caller-only" {
		t.Errorf("the caller rule beside argument rules: %+v", r)
	}
}

func TestArgumentsDecodedStrictly(t *testing.T) {
	big := `{` + strings.Repeat(`"k":1,`, 0)
	for i := range 40 {
		big += `"key` + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `":1,`
	}
	tests := []struct {
		name, args string
		wantErr    bool
	}{
		{name: "escapes", args: `{"a":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}`},
		{name: "numbers", args: `{"a":-0,"b":1.5e3,"c":12345678901234567890,"d":-1E-2}`},
		{name: "large object", args: big + `"x":1}`},
		{name: "large object folding", args: big + `"x":1,"X":2}`, wantErr: true},
		{name: "lone surrogate", args: `{"a":"\ud83d"}`, wantErr: true},
		{name: "leading zero", args: `{"a":01}`, wantErr: true},
		{name: "bare dot", args: `{"a":1.}`, wantErr: true},
		{name: "too deep", args: strings.Repeat(`{"a":`, maxDepth+2) + "1" + strings.Repeat("}", maxDepth+2), wantErr: true},
		{name: "control character", args: "{\"a\":\"\x01\"}", wantErr: true},
		{name: "unterminated", args: `{"a":"b`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeArguments([]byte(tt.args), nil)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, errArguments) {
				t.Fatalf("err %v does not wrap errArguments", err)
			}
			if err == nil {
				var want map[string]any
				if json.Unmarshal([]byte(tt.args), &want) != nil {
					t.Fatal("encoding/json refuses what decodeArguments accepts")
				}
			}
		})
	}
}

func TestCostLimitRefuses(t *testing.T) {
	s := mustCompile(t, Spec{Key: "k", Tool: "t", Name: "slow",
		Allow: `args.items.all(a, args.items.all(b, args.items.all(c, a + b + c != "")))`})
	items := make([]string, 200)
	for i := range items {
		items[i] = "x"
	}
	raw, _ := json.Marshal(map[string]any{"items": items})
	start := time.Now()
	r := s.Arguments(&Input{Tool: Tool{Name: "t"}}, raw)
	if r == nil || r.Err == nil || !strings.Contains(r.Err.Error(), "cost") {
		t.Fatalf("refusal = %+v, want the cost limit's", r)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the cost limit stopped the rule after %v", d)
	}
}

func TestMatchTool(t *testing.T) {
	for _, tt := range []struct {
		pattern, name string
		want          bool
	}{
		{"a", "a", true}, {"a", "ab", false}, {"*", "anything", true}, {"delete_*", "delete_x", true},
		{"delete_*", "xdelete_x", false}, {"*_admin", "db_admin", true}, {"*_admin", "db_admins", false},
		{"a*b*c", "aXbYc", true}, {"a*b*c", "aXcYb", false}, {"a*a", "a", false}, {"get_?", "get_x", true}, {"[", "[", false},
	} {
		if got := matchTool(tt.pattern, tt.name); got != tt.want {
			t.Errorf("matchTool(%q, %q) = %v", tt.pattern, tt.name, got)
		}
	}
}
