package auth_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/portcullis-mcp/portcullis/auth"
)

// A Verifier is the seam between the middleware and token checking: tests
// and embedders can supply their own with VerifierFunc.
func ExampleMiddleware() {
	v := auth.VerifierFunc(func(ctx context.Context, token string) (*auth.Principal, error) {
		if token != "let-me-in" {
			return nil, auth.ErrBadSignature
		}
		return &auth.Principal{Subject: "alice", Issuer: "https://idp.example.com",
			Scopes: []string{"mcp:tools"}, Expiry: time.Now().Add(time.Hour)}, nil
	})
	o := auth.Options{Resource: "https://mcp.example.com/mcp", RequiredScopes: []string{"mcp:tools"}}
	mcpHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := auth.PrincipalFrom(r.Context())
		fmt.Fprintf(w, "hello %s", p.Subject)
	})
	h := auth.Middleware(v, o, auth.MetadataURL(o.Resource), auth.Deps{Logger: slog.New(slog.DiscardHandler)})(mcpHandler)

	for _, header := range []string{"", "Bearer wrong", "Bearer let-me-in"} {
		req := httptest.NewRequest("POST", "/mcp", nil)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Body)
		if rec.Code == 200 {
			fmt.Println(rec.Code, string(body))
		} else {
			fmt.Println(rec.Code, rec.Header().Get("WWW-Authenticate"))
		}
	}
	// Output:
	// 401 Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"
	// 401 Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp:tools", error="invalid_token", error_description="token signature invalid or algorithm not allowed"
	// 200 hello alice
}
