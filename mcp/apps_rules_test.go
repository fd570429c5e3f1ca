package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// refuseRules refuses tool: on the caller (hiding it when hidden), or on
// the arguments when args.
type refuseRules struct {
	tool         string
	hidden, args bool
}

func (r refuseRules) Caller(_ context.Context, _ *sdkauth.TokenInfo, tool string) (string, bool) {
	if !r.args && tool == r.tool {
		return "caller-rule", r.hidden
	}
	return "", false
}

func (r refuseRules) ArgumentRules(tool string) bool { return r.args && tool == r.tool }

func (r refuseRules) Arguments(_ context.Context, _ *sdkauth.TokenInfo, tool, _ string, _ json.RawMessage) string {
	if r.args && tool == r.tool {
		return "argument-rule"
	}
	return ""
}

// TestAppNameHeldToRules: an App's call of a tool by its upstream's own
// name is held to the expression rules of the tool's listed name: a
// caller rule refuses it naming the rule, or leaves the name unknown
// when the rule hides the tool; an argument rule refuses it; each denial
// names the listed tool and the name used.
func TestAppNameHeldToRules(t *testing.T) {
	cat := appCatalog(t, &appServers{})
	info := &sdkauth.TokenInfo{UserID: "alice", Expiration: time.Now().Add(time.Hour)}
	for _, tc := range []struct {
		name     string
		rules    refuseRules
		wantMsg  string
		wantRule string
	}{
		{name: "caller rule", rules: refuseRules{tool: "a_only-a"}, wantMsg: `the policy rule "caller-rule" refuses this call`, wantRule: "caller-rule"},
		{name: "hiding caller rule", rules: refuseRules{tool: "a_only-a", hidden: true}, wantMsg: `Unknown tool: "only-a"`},
		{name: "argument rule", rules: refuseRules{tool: "a_only-a", args: true}, wantMsg: `the policy rule "argument-rule" refuses this call`, wantRule: "argument-rule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var denials []Denial
			g := newToolGate(nil, tc.rules, cat, func(_ context.Context, d Denial) { denials = append(denials, d) }, true)
			reached := false
			h := resolveToolsMiddleware(g)(gateToolsMiddleware(g, nil)(func(context.Context, string, sdk.Request) (sdk.Result, error) {
				reached = true
				return &sdk.CallToolResult{}, nil
			}))
			req := &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: "only-a", Arguments: json.RawMessage(`{}`)}, Extra: &sdk.RequestExtra{TokenInfo: info}}
			_, err := h(t.Context(), "tools/call", req)
			var jerr *jsonrpc.Error
			if reached || err == nil {
				t.Fatalf("the call went on (err %v)", err)
			}
			if !asJSONRPC(err, &jerr) || !strings.Contains(jerr.Message, tc.wantMsg) {
				t.Fatalf("error %v, want %q in it", err, tc.wantMsg)
			}
			if tc.wantRule == "" {
				return
			}
			if len(denials) != 1 || denials[0].Tool != "a_only-a" || denials[0].CalledAs != "only-a" || denials[0].Rule != tc.wantRule || denials[0].Reason != DenialRule {
				t.Errorf("denials %+v, want one of a_only-a called as only-a, refused by %s", denials, tc.wantRule)
			}
		})
	}
}

func asJSONRPC(err error, target **jsonrpc.Error) bool {
	e, ok := err.(*jsonrpc.Error)
	*target = e
	return ok
}
