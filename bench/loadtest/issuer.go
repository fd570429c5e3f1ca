package main

import (
	"fmt"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/portcullis-mcp/portcullis/internal/oidctest"
)

// issuer is the harness's identity provider: OpenID discovery and a JWKS
// with one RSA and one P-256 key, served over loopback HTTP, so Portcullis
// fetches and verifies keys exactly as it does against a real IdP.
type issuer struct {
	url  string
	idp  *oidctest.Issuer
	keys map[jose.SignatureAlgorithm]*oidctest.Key
}

func newIssuer() *issuer {
	rsaKey, ecKey := oidctest.NewRSAKey("bench-rsa"), oidctest.NewECKey("bench-ec")
	idp := oidctest.New(oidctest.Options{Keys: []*oidctest.Key{rsaKey, ecKey}, Claims: map[string]any{"client_id": "loadtest"}})
	return &issuer{url: idp.URL(), idp: idp, keys: map[jose.SignatureAlgorithm]*oidctest.Key{rsaKey.Alg: rsaKey, ecKey.Alg: ecKey}}
}

// mint returns an access token signed with alg for subject, with audience
// aud and scopes, valid for an hour.
func (is *issuer) mint(alg jose.SignatureAlgorithm, subject, aud string, scopes []string) (string, error) {
	k, ok := is.keys[alg]
	if !ok {
		return "", fmt.Errorf("issuer: no %s key", alg)
	}
	now := time.Now()
	return k.Sign(is.idp.Claims(map[string]any{
		"sub": subject, "aud": aud,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"scope": strings.Join(scopes, " "),
	})), nil
}

func (is *issuer) close() { is.idp.Close() }
