package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// issuer is the harness's identity provider: OpenID discovery and a JWKS
// with one RSA and one P-256 key, served over loopback HTTP, so Portcullis
// fetches and verifies keys exactly as it does against a real IdP.
type issuer struct {
	url     string
	srv     *http.Server
	signers map[jose.SignatureAlgorithm]jose.Signer
	jwks    jose.JSONWebKeySet
}

func newIssuer() (*issuer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	is := &issuer{url: "http://" + ln.Addr().String(), signers: map[jose.SignatureAlgorithm]jose.Signer{}}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	for _, k := range []struct {
		alg jose.SignatureAlgorithm
		kid string
		key any
		pub any
	}{
		{jose.RS256, "bench-rsa", rsaKey, rsaKey.Public()},
		{jose.ES256, "bench-ec", ecKey, ecKey.Public()},
	} {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.key, KeyID: k.kid}},
			(&jose.SignerOptions{}).WithType("at+jwt"))
		if err != nil {
			return nil, err
		}
		is.signers[k.alg] = s
		is.jwks.Keys = append(is.jwks.Keys, jose.JSONWebKey{Key: k.pub, KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"issuer":                                is.url,
			"jwks_uri":                              is.url + "/jwks",
			"token_endpoint":                        is.url + "/token",
			"response_types_supported":              []string{"code"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, is.jwks) })
	is.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go is.srv.Serve(ln)
	return is, nil
}

// mint returns an access token signed with alg for subject, with audience
// aud and scopes, valid for an hour.
func (is *issuer) mint(alg jose.SignatureAlgorithm, subject, aud string, scopes []string) (string, error) {
	s, ok := is.signers[alg]
	if !ok {
		return "", fmt.Errorf("issuer: no %s key", alg)
	}
	now := time.Now()
	b, err := json.Marshal(map[string]any{
		"iss": is.url, "sub": subject, "aud": aud, "client_id": "loadtest",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"scope": strings.Join(scopes, " "),
	})
	if err != nil {
		return "", err
	}
	jws, err := s.Sign(b)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

func (is *issuer) close() { is.srv.Close() }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
