//go:build e2e

package e2e

// Attacks through the names an App calls its server's tools by: every
// check that holds for a tool's listed name holds for each name it is
// reached by. A spy App server in this process (it records every call)
// behind the real binary, with auth on and a real OpenID provider.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// appSpy is an App server over stateless Streamable HTTP that records the
// tools/calls it receives: orders names the App ui://orders/app.html;
// lookup(order_id, region) and the others answer with their arguments.
type appSpy struct {
	URL   string
	mu    sync.Mutex
	calls []string // "name arguments"
}

func startAppSpy(t *testing.T) *appSpy {
	t.Helper()
	spy := &appSpy{}
	srv := sdk.NewServer(&sdk.Implementation{Name: "shop", Version: "0.0.1"}, nil)
	record := func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		call := req.Params.Name + " " + string(bytes.TrimSpace(req.Params.Arguments))
		spy.mu.Lock()
		spy.calls = append(spy.calls, call)
		spy.mu.Unlock()
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: call}}}, nil
	}
	obj := json.RawMessage(`{"type":"object"}`)
	lookup := json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"region":{"type":"string","enum":["eu","us"]}},"required":["order_id"]}`)
	srv.AddTool(&sdk.Tool{Name: "orders", InputSchema: obj, Meta: sdk.Meta{"ui": map[string]any{"resourceUri": "ui://orders/app.html"}}}, record)
	srv.AddTool(&sdk.Tool{Name: "lookup", InputSchema: lookup}, record)
	for _, name := range []string{"reset", "audit_log", "debug"} {
		srv.AddTool(&sdk.Tool{Name: name, InputSchema: obj}, record)
	}
	srv.AddResource(&sdk.Resource{URI: "ui://orders/app.html", Name: "orders", MIMEType: "text/html;profile=mcp-app"}, func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/html;profile=mcp-app", Text: "<html>orders</html>"}}}, nil
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(ts.Close)
	spy.URL = ts.URL
	return spy
}

// took returns the calls the spy got since mark (a count taken before).
func (s *appSpy) took(mark int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls[mark:]...)
}

func (s *appSpy) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// TestAppsAttacks tries the tools a caller may not call, and a fixed
// argument smuggled in by case, by every name a tool is reached by: its
// listed name, its upstream's own name, and variants of both (another
// case, the prefix twice). Each is refused as a call of the listed name
// is refused for the model: an unknown tool, or the step-up 403; none
// reaches the upstream. The same calls with what they lack go through.
func TestAppsAttacks(t *testing.T) {
	spy := startAppSpy(t)
	d := startApps(t,
		[]map[string]any{{
			"name": "shop", "transport": "http", "url": spy.URL, "required": true,
			// debug is outside the allow list.
			"allow": []string{"orders", "lookup", "reset", "audit_log"},
		}},
		[]map[string]any{{
			"name": "eu", "path": "/mcp/eu", "tools": []map[string]any{
				{"source": "shop", "name": "orders"},
				{"source": "shop", "name": "lookup", "fixed_arguments": map[string]any{"region": "eu"}},
			},
		}},
		[]map[string]any{
			{"tool": "shop_reset", "scopes": []string{"mcp:admin"}},                     // the step-up 403
			{"tool": "shop_audit_log", "scopes": []string{"mcp:admin"}, "hidden": true}, // an unknown tool
		},
		"shop_orders", "shop_lookup", "shop_reset")
	// A token without mcp:admin, for /mcp.
	limited := d.idp.ClientCredentialsToken(t, idpLimitedClient, idpLimitedClientSecret, d.res["root"])

	variants := func(local string) []string {
		return []string{local, "shop_" + local, strings.ToUpper(local), "SHOP_" + local, "Shop_" + local, "shop_shop_" + local, "shop." + local}
	}
	for _, era := range appEras {
		t.Run(eraName(era), func(t *testing.T) {
			t.Run("outside the allow list", func(t *testing.T) {
				mark := spy.mark()
				for _, name := range variants("debug") {
					if r := d.call(t, "root", era, name, map[string]any{}); r.Code != -32602 || !strings.Contains(r.Message, "Unknown tool") {
						t.Errorf("%s: %+v, want an unknown tool", name, r)
					}
				}
				if got := spy.took(mark); len(got) > 0 {
					t.Errorf("the upstream got %q", got)
				}
			})
			t.Run("the token lacks the scope", func(t *testing.T) {
				mark := spy.mark()
				for _, name := range variants("reset") {
					r := d.callAs(t, "root", limited, era, name, map[string]any{})
					listedOrOwn := name == "reset" || name == "shop_reset"
					switch {
					case listedOrOwn && r.Status != http.StatusForbidden:
						t.Errorf("%s: %+v, want the step-up 403", name, r)
					case !listedOrOwn && (r.Code != -32602 || !strings.Contains(r.Message, "Unknown tool")):
						t.Errorf("%s: %+v, want an unknown tool", name, r)
					}
				}
				for _, name := range variants("audit_log") {
					r := d.callAs(t, "root", limited, era, name, map[string]any{})
					_, hint, _ := strings.Cut(r.Message, "Did you mean")
					_, list, _ := strings.Cut(r.Message, "Available tools")
					if r.Code != -32602 || !strings.Contains(r.Message, "Unknown tool") || strings.Contains(hint+list, "audit_log") {
						t.Errorf("%s: %+v, want an unknown tool that names no hidden tool", name, r)
					}
				}
				if got := spy.took(mark); len(got) > 0 {
					t.Errorf("the upstream got %q", got)
				}
				// With the scope, by either name.
				for _, name := range []string{"reset", "shop_reset", "audit_log", "shop_audit_log"} {
					if r := d.call(t, "root", era, name, map[string]any{}); r.Text == "" || r.IsError {
						t.Errorf("%s with the scope: %+v", name, r)
					}
				}
			})
			t.Run("a fixed argument smuggled", func(t *testing.T) {
				mark := spy.mark()
				for _, name := range append(variants("lookup"), "shop_lookup") {
					for _, key := range []string{"region", "Region", "REGION", "rEgIoN"} {
						r := d.call(t, "eu", era, name, map[string]any{"order_id": "A-1", key: "us"})
						if r.Code != -32602 || r.Text != "" {
							t.Errorf("%s with %s: %+v, want -32602", name, key, r)
						}
					}
				}
				if got := spy.took(mark); len(got) > 0 {
					t.Errorf("the upstream got %q", got)
				}
				// Without it, by either name: the fixed value is set.
				for _, name := range []string{"lookup", "shop_lookup"} {
					want := `lookup {"order_id":"A-1","region":"eu"}`
					if r := d.call(t, "eu", era, name, map[string]any{"order_id": "A-1"}); r.Text != want {
						t.Errorf("%s: %+v, want the upstream to get %s", name, r, want)
					}
				}
			})
			t.Run("a tool the virtual server leaves out", func(t *testing.T) {
				mark := spy.mark()
				for _, local := range []string{"reset", "audit_log", "debug"} {
					for _, name := range variants(local) {
						if r := d.call(t, "eu", era, name, map[string]any{}); r.Code != -32602 || !strings.Contains(r.Message, "Unknown tool") {
							t.Errorf("%s at eu: %+v, want an unknown tool", name, r)
						}
					}
				}
				if got := spy.took(mark); len(got) > 0 {
					t.Errorf("the upstream got %q", got)
				}
			})
		})
	}
}
