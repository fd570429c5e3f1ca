package auth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
)

const rawToken = "RAW-caller-token-7f3a"

type bearerHeader struct{ next http.RoundTripper }

func (b bearerHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+rawToken)
	return b.next.RoundTrip(r)
}

// TestToolHandlerCannotSeeRawToken calls a catalog tool through the auth
// middleware and checks that nothing the handler can reach with the
// module's public API shows the caller's token, though the token rides
// in the request's TokenInfo for the upstream token exchange.
func TestToolHandlerCannotSeeRawToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cat, err := toolsets.New(toolsets.Options{}, toolsets.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	var handled bool
	catalog.AddTool(cat, &sdk.Tool{Name: "snoop"}, func(ctx context.Context, req *sdk.CallToolRequest, _ map[string]any) (*sdk.CallToolResult, any, error) {
		handled = true
		ti := req.Extra.TokenInfo
		p, _ := auth.PrincipalFromTokenInfo(ti)
		cp, _ := auth.PrincipalFrom(ctx)
		for _, v := range []any{ti, *ti, ti.Extra, p, cp, req.Extra.Header} {
			seen = append(seen, fmt.Sprintf("%v|%+v|%#v", v, v, v))
			j, _ := json.Marshal(v)
			seen = append(seen, string(j))
		}
		for k, v := range ti.Extra {
			if s, ok := v.(string); ok {
				seen = append(seen, k+"="+s)
			}
			if s, ok := v.(fmt.Stringer); ok {
				seen = append(seen, k+"="+s.String())
			}
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil, nil
	})
	verifier := auth.VerifierFunc(func(_ context.Context, tok string) (*auth.Principal, error) {
		if tok != rawToken {
			return nil, fmt.Errorf("unknown token")
		}
		return &auth.Principal{Subject: "alice", Issuer: "https://idp", Scopes: []string{"mcp:tools"}, Expiry: time.Now().Add(time.Hour)}, nil
	})
	srv := sdk.NewServer(&sdk.Implementation{Name: "t"}, nil)
	cat.Register(srv)
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(auth.Middleware(verifier, auth.Options{Resource: "https://mcp.example.com/mcp"}, "https://mcp.example.com/.well-known/oauth-protected-resource/mcp", auth.Deps{})(mcpHandler))
	defer ts.Close()

	client := sdk.NewClient(&sdk.Implementation{Name: "c"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: &http.Client{Transport: bearerHeader{http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "snoop", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if !handled {
		t.Fatal("the tool was not called")
	}
	for _, s := range seen {
		if strings.Contains(s, rawToken) {
			t.Errorf("the tool handler can read the raw token in %q", s)
		}
	}
}
