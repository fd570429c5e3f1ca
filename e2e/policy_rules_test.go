//go:build e2e

package e2e

// Expression rules end to end: the real binary, tokens of the real OpenID
// provider, argument rules on /mcp and on a virtual server, on built-in
// tools and on an upstream's, in both protocol eras (a 2025-11-25 legacy
// session, and 2026-07-28 single requests, whose calls of an HTTP
// upstream's tool are direct), with a renamed tool whose fixed arguments
// the rule reads; and a rule on the caller alone that hides a tool.

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPolicyRules(t *testing.T) {
	spy := startSpyUpstream(t)
	idp := startIdP(t)
	addr := freeLoopbackAddr(t)
	root, a := "http://"+addr+"/mcp", "http://"+addr+"/mcp/a"
	cfg := map[string]any{
		"auth": map[string]any{
			"resource": root,
			"issuers":  []map[string]any{{"issuer": idp.Issuer()}},
			"policy": []map[string]any{
				{"tool": "spy_lookup_order", "rules": []map[string]any{{"name": "eu-only", "allow": `args.region == "eu"`}}},
				{"tool": "calculator", "rules": []map[string]any{{"name": "no-divide", "allow": `args.operation != "divide"`}}},
				// A claim this client's tokens do not hold that value of:
				// echo is hidden from it.
				{"tool": "echo", "rules": []map[string]any{{"name": "echo-for-nobody", "allow": `caller.claims.client_id == "nobody"`}}},
			},
		},
		"tools":     map[string]any{"toolsets": []string{"core"}},
		"upstreams": []map[string]any{{"name": "spy", "transport": "http", "url": spy.URL, "required": true}},
		"servers": []map[string]any{{
			"name": "a", "path": "/mcp/a",
			"tools": []map[string]any{
				{"source": "spy", "name": "lookup_order", "expose_as": "order", "fixed_arguments": map[string]any{"region": "eu", "shop": "berlin"}},
				{"source": "core", "name": "calculator", "expose_as": "add", "fixed_arguments": map[string]any{"operation": "add"}},
			},
			"auth": map[string]any{"policy": []map[string]any{
				// Reads the fixed arguments: the rule sees what the tool gets.
				{"tool": "order", "rules": []map[string]any{{"name": "berlin-eu-orders", "allow": `args.shop == "berlin" && args.region == "eu" && args.order_id.startsWith("EU-")`}}},
				{"tool": "add", "rules": []map[string]any{{"name": "small-sums", "allow": `args.operation == "add" && args.a < 100`}}},
			}},
		}},
	}
	srv := startServer(t, nil, "--config", writeConfigFile(t, cfg), "--listen", addr)
	awaitReady(t, srv, 90*time.Second)
	tokens := map[string]string{
		root: idp.ClientCredentialsToken(t, idpClient, idpClientSecret, root),
		a:    idp.ClientCredentialsToken(t, idpClient, idpClientSecret, a),
	}

	for _, era := range []string{"2025-11-25", modernProtocol} {
		t.Run(era, func(t *testing.T) {
			id := 10
			// call calls tool at endpoint in this era and returns the
			// JSON-RPC error's message, or the result.
			call := func(endpoint, tool, args string) (errMsg, result string) {
				t.Helper()
				id++
				var h http.Header
				if era == modernProtocol {
					h = modernHeaders(tokens[endpoint], "tools/call", tool)
					m := callTool(t, endpoint, h, id, tool, args, ","+modernMeta)
					if m.Error != nil {
						return m.Error.Message, ""
					}
					return "", string(m.Result)
				}
				h = legacySession(t, endpoint, tokens[endpoint], era)
				m := callTool(t, endpoint, h, id, tool, args, "")
				if m.Error != nil {
					return m.Error.Message, ""
				}
				return "", string(m.Result)
			}
			order := func(prefix string) string {
				return fmt.Sprintf("%s-%s-%d", prefix, strings.ReplaceAll(era, "-", ""), time.Now().UnixNano())
			}

			euRoot, usRoot, euA, usA := order("EU"), order("US"), order("EU"), order("US")
			tests := []struct {
				name, endpoint, tool, args string
				wantRule                   string // empty: allowed
				want                       string // in the result or the error
			}{
				{name: "upstream tool allowed", endpoint: root, tool: "spy_lookup_order", args: `{"order_id":"` + euRoot + `","region":"eu"}`, want: euRoot + ": done"},
				{name: "upstream tool refused", endpoint: root, tool: "spy_lookup_order", args: `{"order_id":"` + usRoot + `","region":"us"}`, wantRule: "eu-only"},
				{name: "built-in tool allowed", endpoint: root, tool: "calculator", args: `{"operation":"add","a":1,"b":2}`, want: `"result":3`},
				{name: "built-in tool refused", endpoint: root, tool: "calculator", args: `{"operation":"divide","a":1,"b":2}`, wantRule: "no-divide"},
				{name: "built-in tool smuggled by case", endpoint: root, tool: "calculator", args: `{"operation":"add","OPERATION":"divide","a":1,"b":2}`, wantRule: "no-divide"},
				{name: "a list where the rule compares a scalar", endpoint: root, tool: "calculator", args: `{"operation":["divide"],"a":1,"b":2}`, wantRule: "no-divide"},
				{name: "an object where the rule compares a scalar", endpoint: root, tool: "spy_lookup_order", args: `{"order_id":"` + usRoot + `","region":{"name":"eu"}}`, wantRule: "eu-only"},
				{name: "hidden by a caller rule", endpoint: root, tool: "echo", args: `{"text":"hi"}`, want: "Unknown tool"},
				{name: "renamed upstream tool, fixed arguments read", endpoint: a, tool: "order", args: `{"order_id":"` + euA + `"}`, want: euA + ": done"},
				{name: "renamed upstream tool refused", endpoint: a, tool: "order", args: `{"order_id":"` + usA + `"}`, wantRule: "berlin-eu-orders"},
				{name: "renamed built-in tool allowed", endpoint: a, tool: "add", args: `{"a":1,"b":2}`, want: `"result":3`},
				{name: "renamed built-in tool refused", endpoint: a, tool: "add", args: `{"a":500,"b":2}`, wantRule: "small-sums"},
				{name: "a number as a string", endpoint: a, tool: "add", args: `{"a":"1","b":2}`, wantRule: "small-sums"},
				{name: "a duplicate key", endpoint: a, tool: "add", args: `{"a":1,"a":500,"b":2}`, wantRule: "small-sums"},
			}
			for _, tt := range tests {
				errMsg, result := call(tt.endpoint, tt.tool, tt.args)
				if tt.wantRule != "" {
					if !strings.Contains(errMsg, `the policy rule "`+tt.wantRule+`" refuses this call`) || strings.Contains(errMsg, "args.") {
						t.Errorf("%s: error %q, result %s; want a refusal naming %s and nothing of its expression", tt.name, errMsg, result, tt.wantRule)
					}
					continue
				}
				if !strings.Contains(errMsg+result, tt.want) {
					t.Errorf("%s: error %q, result %s; want %q", tt.name, errMsg, result, tt.want)
				}
			}
			spy.checkSpyArgs(t, euA, "lookup_order", map[string]any{"order_id": euA, "region": "eu", "shop": "berlin"})
			spy.checkSpyNothing(t, usRoot)
			spy.checkSpyNothing(t, usA)

			var names []string
			if era == modernProtocol {
				names = toolNames(t, callOK(t, root, modernToolsList(2), modernHeaders(tokens[root], "tools/list", "")))
			} else {
				names = toolNames(t, callOK(t, root, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, legacySession(t, root, tokens[root], era)))
			}
			if slices.Contains(names, "echo") || !slices.Contains(names, "calculator") || !slices.Contains(names, "spy_lookup_order") {
				t.Errorf("/mcp lists %q: want calculator and spy_lookup_order, and not echo, which a caller rule hides", names)
			}
		})
	}
}
