package portcullis

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
)

// TestPolicyRulesServed runs serve --dev with expression rules on /mcp
// and on a virtual server, in both eras: an argument rule refuses the
// calls it does not hold for, naming the rule and nothing of its
// expression, and decides on the arguments the tool receives (a renamed
// tool's fixed argument set); arguments smuggled past it by letter case
// are refused; a rule on the caller alone hides its tool from tools/list
// and answers a call as a call of an unknown tool.
func TestPolicyRulesServed(t *testing.T) {
	cfg := writeConfig(t, `
auth:
  policy:
    - tool: calculator
      rules:
        - name: no-divide
          allow: args.operation != "divide"
    - tool: "ec*"
      rules:
        - name: echo-for-alice
          allow: caller.client_id == "alice"
servers:
  - name: math
    path: /mcp/math
    tools:
      - source: core
        name: calculator
        expose_as: add_numbers
        fixed_arguments: {operation: add}
    auth:
      policy:
        - tool: add_numbers
          rules:
            - name: small-adds
              allow: args.operation == "add" && args.a <= 100
`)
	base, issuer, _ := startDevMetrics(t, "--config", cfg)
	connect := func(t *testing.T, path, version string) *sdk.ClientSession {
		t.Helper()
		return connectWithToken(t, base+path, devToken(t, issuer, "rules-test", base+path, "mcp:tools"), version)
	}
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			ctx := t.Context()
			root, math := connect(t, "/mcp", version), connect(t, "/mcp/math", version)
			list, err := root.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range list.Tools {
				names = append(names, tl.Name)
			}
			if slices.Contains(names, "echo") || !slices.Contains(names, "calculator") {
				t.Errorf("/mcp lists %q: want calculator, and not echo, which a caller rule hides from this client", names)
			}
			tests := []struct {
				name     string
				cs       *sdk.ClientSession
				tool     string
				args     map[string]any
				wantRule string // empty: the call goes on
				want     string // in the refusal, or the result
			}{
				{name: "allowed", cs: root, tool: "calculator", args: map[string]any{"operation": "add", "a": 1, "b": 2}, want: `"result":3`},
				{name: "refused", cs: root, tool: "calculator", args: map[string]any{"operation": "divide", "a": 1, "b": 2}, wantRule: "no-divide"},
				{name: "smuggled by case", cs: root, tool: "calculator", args: map[string]any{"operation": "add", "Operation": "divide", "a": 1, "b": 2}, wantRule: "no-divide"},
				{name: "hidden", cs: root, tool: "echo", args: map[string]any{"text": "hi"}, want: "Unknown tool"},
				{name: "renamed, fixed argument", cs: math, tool: "add_numbers", args: map[string]any{"a": 2, "b": 3}, want: `"result":5`},
				{name: "renamed, refused", cs: math, tool: "add_numbers", args: map[string]any{"a": 1000, "b": 3}, wantRule: "small-adds"},
				{name: "number as a string", cs: math, tool: "add_numbers", args: map[string]any{"a": "2", "b": 3}, wantRule: "small-adds"},
			}
			for _, tt := range tests {
				res, err := tt.cs.CallTool(ctx, &sdk.CallToolParams{Name: tt.tool, Arguments: tt.args})
				got := ""
				switch {
				case err != nil:
					got = err.Error()
				case res.IsError:
					b, _ := json.Marshal(res.Content)
					got = "tool error: " + string(b)
				default:
					b, _ := json.Marshal(res.StructuredContent)
					got = string(b)
				}
				if tt.wantRule != "" {
					if err == nil || !strings.Contains(got, `the policy rule "`+tt.wantRule+`" refuses this call`) || strings.Contains(got, "args.") {
						t.Errorf("%s: got %q (error %v), want a refusal naming %q and nothing of its expression", tt.name, got, err != nil, tt.wantRule)
					}
					continue
				}
				if !strings.Contains(got, tt.want) {
					t.Errorf("%s: got %q, want %q in it", tt.name, got, tt.want)
				}
			}
		})
	}
}

// TestPolicyRulesChecked: a configuration's rules are compiled and
// type-checked at start, every problem reported at once under its key.
func TestPolicyRulesChecked(t *testing.T) {
	_, err := loadConfig(writeConfig(t, `
auth:
  policy:
    - tool: query
      rules:
        - name: typo
          allow: caller.subjet == "x"
        - name: not-bool
          allow: args.database
    - tool: "delete_*"
      scopes: [admin]
      rules:
        - name: typo
          allow: true
servers:
  - name: math
    path: /mcp/math
    tools:
      - source: core
        name: calculator
    auth:
      policy:
        - tool: calculator
          rules:
            - name: broken
              allow: args.a ==
`), nil, nil)
	if err == nil {
		t.Fatal("loadConfig: no error")
	}
	for _, want := range []string{
		`auth.policy[0].rules[0].allow: caller has no field "subjet"`,
		`auth.policy[0].rules[1].allow: must be a bool`,
		`auth.policy[1].tool: "delete_*" is a pattern`,
		`auth.policy[1].rules[0].name: duplicate rule name "typo"`,
		`servers[0].auth.policy[0].rules[0].allow: 1:`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// BenchmarkPolicyRules measures issue 42's goal: what ten argument rules
// add to a call, asked as the tool gate asks them (a caller rule check,
// then the argument rules), the caller converted from a verified token's
// principal (taken from the token info by one map lookup, left out
// here) and the tool's facts looked up in the catalog, on a call of
// the core calculator with five arguments. docs/performance.md has the
// figures.
func BenchmarkPolicyRules(b *testing.B) {
	exprs := []string{
		`args.operation == "add"`,
		`!has(args.precision) || args.precision <= 10`,
		`args.unit in ["m", "s", "kg"]`,
		`!args.note.contains("DROP")`,
		`size(args.note) < 4096`,
		`args.a >= -1000000 && args.a <= 1000000`,
		`"analysts" in caller.groups || args.b != 0`,
		`caller.claims.department == "data" || args.unit != "kg"`,
		`tool.server == "" || args.operation != "divide"`,
		`now.getHours() >= 0 && tool.annotations.read_only_hint`,
	}
	var cfg strings.Builder
	cfg.WriteString("auth:\n  policy:\n    - tool: calculator\n      rules:\n")
	for i, e := range exprs {
		fmt.Fprintf(&cfg, "        - name: rule-%d\n          allow: '%s'\n", i, strings.ReplaceAll(e, "'", "''"))
	}
	c, err := loadConfig(writeConfig(b, cfg.String()), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	cat, err := toolsets.New(c.Tools, toolsets.Deps{})
	if err != nil {
		b.Fatal(err)
	}
	rules, err := newPolicyRules("auth.", c.Auth.Policy, "", cat.ToolFacts, func(n string) string { return n }, slog.New(slog.DiscardHandler))
	if err != nil || rules == nil {
		b.Fatal(err)
	}
	principal := &auth.Principal{
		Issuer: "https://idp.example", Subject: "alice", ClientID: "cli", Scopes: []string{"mcp:tools"}, Roles: []string{"analysts"},
		Claims: map[string]json.RawMessage{"sub": []byte(`"alice"`), "department": []byte(`"data"`), "scope": []byte(`"mcp:tools"`)},
	}
	pr := rules.(*policyRules)
	args := json.RawMessage(`{"operation":"add","a":1,"b":2,"unit":"m","note":"a sum of two numbers"}`)
	ctx := b.Context()
	b.ReportAllocs()
	cpu := processCPU(b)
	for b.Loop() {
		if rule, _ := pr.caller(ctx, principal, "calculator"); rule != "" {
			b.Fatalf("refused by %s", rule)
		}
		if !rules.ArgumentRules("calculator") {
			b.Fatal("no argument rules")
		}
		if rule := pr.arguments(ctx, principal, "calculator", "calculator", args); rule != "" {
			b.Fatalf("refused by %s", rule)
		}
	}
	b.ReportMetric(float64((processCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
