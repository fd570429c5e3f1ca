//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// These tests show that the test OpenID provider (e2e/idp) works on its
// own, with an independent verifier (go-oidc), before Portcullis relies on
// it: every auth end-to-end test stands on them.

// idpResource is a made-up resource URL: the IdP accepts any http(s) one.
const idpResource = "http://127.0.0.1:18080/mcp"

// verifyIdPToken verifies token's signature against the IdP's JWKS (found
// through discovery, as a resource server would), its iss and expiry with
// go-oidc, and that aud is exactly resource. It returns the claims.
func verifyIdPToken(t *testing.T, p *IdP, token, resource string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	provider, err := oidc.NewProvider(ctx, p.Issuer())
	if err != nil {
		t.Fatalf("discovery of %s: %v", p.Issuer(), err)
	}
	v := provider.Verifier(&oidc.Config{SkipClientIDCheck: true, SupportedSigningAlgs: []string{oidc.RS256, oidc.ES256}})
	tok, err := v.Verify(ctx, token)
	if err != nil {
		t.Fatalf("access token does not verify against %s: %v", p.JWKSURL(), err)
	}
	if !slices.Equal(tok.Audience, []string{resource}) {
		t.Fatalf("aud = %v, want [%s]", tok.Audience, resource)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

func tokenScopes(claims map[string]any) []string {
	s, _ := claims["scope"].(string)
	f := strings.Fields(s)
	slices.Sort(f)
	return f
}

func sortedStrings(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestIdPDiscovery(t *testing.T) {
	p := startIdP(t)
	for _, path := range []string{"/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, p.Issuer()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, body := p.do(t, req)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: status %d", path, resp.StatusCode)
		}
		var meta struct {
			Issuer               string   `json:"issuer"`
			JWKSURI              string   `json:"jwks_uri"`
			TokenEndpoint        string   `json:"token_endpoint"`
			RegistrationEndpoint string   `json:"registration_endpoint"`
			Introspection        string   `json:"introspection_endpoint"`
			Revocation           string   `json:"revocation_endpoint"`
			GrantTypes           []string `json:"grant_types_supported"`
			PKCEMethods          []string `json:"code_challenge_methods_supported"`
			Scopes               []string `json:"scopes_supported"`
		}
		if err := json.Unmarshal(body, &meta); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if meta.Issuer != p.Issuer() || meta.JWKSURI != p.JWKSURL() || meta.TokenEndpoint != p.TokenURL() ||
			meta.RegistrationEndpoint != p.RegistrationURL() || meta.Introspection != p.IntrospectionURL() || meta.Revocation != p.RevocationURL() {
			t.Errorf("GET %s: endpoints %+v, want those of %s", path, meta, p.Issuer())
		}
		for _, g := range []string{"client_credentials", "authorization_code"} {
			if !slices.Contains(meta.GrantTypes, g) {
				t.Errorf("GET %s: grant_types_supported %v lacks %s", path, meta.GrantTypes, g)
			}
		}
		if !slices.Equal(meta.PKCEMethods, []string{"S256"}) {
			t.Errorf("GET %s: code_challenge_methods_supported %v, want [S256]", path, meta.PKCEMethods)
		}
		for _, s := range idpScopes {
			if !slices.Contains(meta.Scopes, s) {
				t.Errorf("GET %s: scopes_supported %v lacks %s", path, meta.Scopes, s)
			}
		}
	}
}

func TestIdPClientCredentials(t *testing.T) {
	p := startIdP(t)

	t.Run("JWT for the resource, verified against the JWKS", func(t *testing.T) {
		token := p.ClientCredentialsToken(t, idpClient, idpClientSecret, idpResource)
		header, _ := decodeJWT(t, token)
		if header["alg"] != "RS256" || header["kid"] == nil {
			t.Errorf("header %v, want alg RS256 and a kid", header)
		}
		claims := verifyIdPToken(t, p, token, idpResource)
		if claims["iss"] != p.Issuer() || claims["client_id"] != idpClient || claims["sub"] != idpClient {
			t.Errorf("claims %v: want iss %s, client_id and sub %s", claims, p.Issuer(), idpClient)
		}
		// No scope requested: every scope the client may have.
		if got := tokenScopes(claims); !slices.Equal(got, sortedStrings(idpScopes)) {
			t.Errorf("default scope %v, want %v", got, sortedStrings(idpScopes))
		}
		if roles, _ := claims["roles"].([]any); !slices.Equal(roles, []any{"mcp-admin"}) {
			t.Errorf("roles %v, want [mcp-admin]", claims["roles"])
		}
		exp, _ := claims["exp"].(float64)
		iat, _ := claims["iat"].(float64)
		if exp-iat != 3600 {
			t.Errorf("exp - iat = %v, want 3600", exp-iat)
		}
	})

	t.Run("requested scope", func(t *testing.T) {
		token := p.ClientCredentialsToken(t, idpClient, idpClientSecret, idpResource, "weather:read")
		if got := tokenScopes(verifyIdPToken(t, p, token, idpResource)); !slices.Equal(got, []string{"weather:read"}) {
			t.Errorf("scope %v, want [weather:read]", got)
		}
	})

	t.Run("another resource has the other aud", func(t *testing.T) {
		other := "https://other.example.test/mcp"
		token := p.ClientCredentialsToken(t, idpClient, idpClientSecret, other)
		verifyIdPToken(t, p, token, other)
	})

	t.Run("ES256 client", func(t *testing.T) {
		token := p.ClientCredentialsToken(t, idpES256Client, idpES256ClientSecret, idpResource)
		if header, _ := decodeJWT(t, token); header["alg"] != "ES256" {
			t.Errorf("alg %v, want ES256", header["alg"])
		}
		verifyIdPToken(t, p, token, idpResource)
	})

	t.Run("limited client", func(t *testing.T) {
		token := p.ClientCredentialsToken(t, idpLimitedClient, idpLimitedClientSecret, idpResource)
		if got := tokenScopes(verifyIdPToken(t, p, token, idpResource)); !slices.Equal(got, []string{idpLimitedScope}) {
			t.Errorf("limited client's default scope %v, want [%s]", got, idpLimitedScope)
		}
		status, tr := p.Token(t, idpLimitedClient, idpLimitedClientSecret, url.Values{
			"grant_type": {"client_credentials"}, "resource": {idpResource}, "scope": {"mcp:admin"},
		})
		if status != http.StatusBadRequest || tr.Error != "invalid_scope" {
			t.Errorf("limited client asking for mcp:admin: status %d, error %q; want 400 invalid_scope", status, tr.Error)
		}
	})

	t.Run("wrong secret", func(t *testing.T) {
		status, tr := p.Token(t, idpClient, "wrong", url.Values{"grant_type": {"client_credentials"}, "resource": {idpResource}})
		if status != http.StatusUnauthorized || tr.Error != "invalid_client" {
			t.Errorf("wrong secret: status %d, error %q; want 401 invalid_client", status, tr.Error)
		}
	})

	t.Run("resource must be an http(s) URL", func(t *testing.T) {
		status, tr := p.Token(t, idpClient, idpClientSecret, url.Values{"grant_type": {"client_credentials"}, "resource": {"urn:example:x"}})
		if status != http.StatusBadRequest || tr.Error != "invalid_target" {
			t.Errorf("urn resource: status %d, error %q; want 400 invalid_target", status, tr.Error)
		}
	})
}

func TestIdPAuthorizationCodePKCE(t *testing.T) {
	p := startIdP(t)

	t.Run("default scope", func(t *testing.T) {
		token := p.AuthorizationCodeToken(t, idpResource)
		claims := verifyIdPToken(t, p, token, idpResource)
		if claims["sub"] != "alice" {
			t.Errorf("sub %v, want alice", claims["sub"])
		}
		if got := tokenScopes(claims); !slices.Equal(got, sortedStrings(idpScopes)) {
			t.Errorf("scope %v, want %v", got, sortedStrings(idpScopes))
		}
		if groups, _ := claims["groups"].([]any); !slices.Equal(groups, []any{"users"}) {
			t.Errorf("groups %v, want [users]", claims["groups"])
		}
	})

	t.Run("requested scope, admin user", func(t *testing.T) {
		tr := p.AuthorizationCodeFlow(t, "admin-bob", idpResource, "mcp:tools")
		claims := verifyIdPToken(t, p, tr.AccessToken, idpResource)
		if claims["sub"] != "admin-bob" || !slices.Equal(tokenScopes(claims), []string{"mcp:tools"}) {
			t.Errorf("claims %v: want sub admin-bob, scope mcp:tools", claims)
		}
		if groups, _ := claims["groups"].([]any); !slices.Equal(groups, []any{"users", "admins"}) {
			t.Errorf("groups %v, want [users admins]", claims["groups"])
		}
	})
}

func TestIdPIntrospection(t *testing.T) {
	p := startIdP(t)
	token := p.OpaqueToken(t, idpResource, "mcp:tools")
	res := p.Introspect(t, token)
	if res["active"] != true || res["aud"] != idpResource || res["scope"] != "mcp:tools" || res["sub"] != idpOpaqueClient ||
		res["client_id"] != idpOpaqueClient || res["iss"] != p.Issuer() || res["token_type"] != "Bearer" {
		t.Errorf("introspection %v: want active, aud %s, scope mcp:tools, sub and client_id %s, iss %s", res, idpResource, idpOpaqueClient, p.Issuer())
	}
	if exp, _ := res["exp"].(float64); time.Unix(int64(exp), 0).Before(time.Now()) {
		t.Errorf("introspection exp %v is in the past", res["exp"])
	}

	if res := p.Introspect(t, "made-up-token"); res["active"] != false {
		t.Errorf("introspection of a made-up token: %v, want active false", res)
	}
	p.Revoke(t, token)
	if res := p.Introspect(t, token); res["active"] != false {
		t.Errorf("introspection after revocation: %v, want active false", res)
	}
}

// TestIdPKeysPersist shows that an IdP restarted with the same keys file
// publishes the same kids, and a token of the first verifies with the second.
func TestIdPKeysPersist(t *testing.T) {
	first := startIdP(t)
	token := first.ClientCredentialsToken(t, idpClient, idpClientSecret, idpResource)
	kids := func(p *IdP) []string {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, p.JWKSURL(), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, body := p.do(t, req)
		var jwks struct {
			Keys []struct{ Kid, Alg, Kty, D string }
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &jwks) != nil {
			t.Fatalf("GET %s: status %d: %s", p.JWKSURL(), resp.StatusCode, body)
		}
		var out []string
		for _, k := range jwks.Keys {
			if k.D != "" {
				t.Fatalf("JWKS publishes a private key")
			}
			out = append(out, k.Alg+":"+k.Kid)
		}
		slices.Sort(out)
		return out
	}
	want := kids(first)
	if len(want) != 2 || !strings.HasPrefix(want[0], "ES256:") || !strings.HasPrefix(want[1], "RS256:") {
		t.Fatalf("JWKS kids %v, want one ES256 and one RS256 key", want)
	}
	if fi, err := os.Stat(first.KeysFile); err != nil {
		t.Fatalf("keys file: %v", err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("keys file %s has mode %v, want 0600", first.KeysFile, fi.Mode().Perm())
	}
	first.stop(t)

	second := startIdP(t, "IDP_KEYS_FILE="+first.KeysFile)
	if got := kids(second); !slices.Equal(got, want) {
		t.Errorf("kids after restart %v, want %v", got, want)
	}
	// The issuer differs (a new port), so check the signature only.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := oidc.NewRemoteKeySet(ctx, second.JWKSURL()).VerifySignature(ctx, token); err != nil {
		t.Errorf("token of the first IdP does not verify with the restarted one's keys: %v", err)
	}
}

// TestIdPOptions checks the knobs later tests use: a short token lifetime
// and extra clients.
func TestIdPOptions(t *testing.T) {
	p := startIdP(t, "IDP_ACCESS_TOKEN_TTL=5",
		`IDP_CLIENTS=[{"client_id":"extra","client_secret":"extra-secret","grant_types":["client_credentials"],"response_types":[],"redirect_uris":[],"scope":"weather:read"}]`)
	token := p.ClientCredentialsToken(t, "extra", "extra-secret", idpResource)
	claims := verifyIdPToken(t, p, token, idpResource)
	exp, _ := claims["exp"].(float64)
	iat, _ := claims["iat"].(float64)
	if exp-iat != 5 {
		t.Errorf("exp - iat = %v, want 5 (IDP_ACCESS_TOKEN_TTL)", exp-iat)
	}
	if got := tokenScopes(claims); !slices.Equal(got, []string{"weather:read"}) {
		t.Errorf("extra client's scope %v, want [weather:read]", got)
	}
	// The built-in clients are still there.
	p.ClientCredentialsToken(t, idpClient, idpClientSecret, idpResource)
}
