package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// t0 is the tests' "now".
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// clock is an injectable, settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testKey is a signing key with its kid and algorithm.
type testKey struct {
	kid string
	alg jose.SignatureAlgorithm
	key crypto.Signer
}

func newRSAKey(t testing.TB, kid string) testKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{kid: kid, alg: jose.RS256, key: k}
}

func newECKey(t testing.TB, kid string) testKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{kid: kid, alg: jose.ES256, key: k}
}

func (k testKey) jwk() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.key.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"}
}

// sign signs claims with k as an access token (JOSE header typ at+jwt,
// RFC 9068).
func (k testKey) sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	return k.signTyped(t, "at+jwt", claims)
}

// signTyped signs claims with k and the JOSE header typ ("" for none).
func (k testKey) signTyped(t testing.TB, typ string, claims map[string]any) string {
	t.Helper()
	opts := &jose.SignerOptions{}
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.key, KeyID: k.kid}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(claims)
	jws, err := s.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fakeIssuer is an in-process OpenID provider: discovery and JWKS.
type fakeIssuer struct {
	srv         *httptest.Server
	mu          sync.Mutex
	keys        []testKey
	jwksFetches atomic.Int32
	down        atomic.Bool
}

func newFakeIssuer(t testing.TB, keys ...testKey) *fakeIssuer {
	t.Helper()
	f := &fakeIssuer{keys: keys}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		if f.down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		writeJSON(w, 200, map[string]any{
			"issuer":                                f.srv.URL,
			"jwks_uri":                              f.srv.URL + "/jwks",
			"authorization_endpoint":                f.srv.URL + "/authorize",
			"token_endpoint":                        f.srv.URL + "/token",
			"response_types_supported":              []string{"code"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		f.jwksFetches.Add(1)
		if f.down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		f.mu.Lock()
		set := jose.JSONWebKeySet{}
		for _, k := range f.keys {
			set.Keys = append(set.Keys, k.jwk())
		}
		f.mu.Unlock()
		writeJSON(w, 200, set)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeIssuer) URL() string { return f.srv.URL }

func (f *fakeIssuer) publish(k testKey) {
	f.mu.Lock()
	f.keys = append(f.keys, k)
	f.mu.Unlock()
}

// claims returns a valid claim set for f at t0, with overrides applied
// (a nil value deletes the claim).
func (f *fakeIssuer) claims(over map[string]any) map[string]any {
	c := map[string]any{
		"iss":       f.URL(),
		"sub":       "alice",
		"aud":       testResource,
		"exp":       t0.Add(time.Hour).Unix(),
		"iat":       t0.Add(-time.Minute).Unix(),
		"nbf":       t0.Add(-time.Minute).Unix(),
		"client_id": "claude",
		"scope":     "mcp:tools read",
	}
	for k, v := range over {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

const testResource = "https://mcp.example.com/mcp"

// testOptions configures one issuer f.
func testOptions(f *fakeIssuer) Options {
	o := Options{
		Resource: testResource,
		Issuers:  []IssuerOptions{{Issuer: f.URL(), Audiences: []string{"api://portcullis-app-id"}}},
	}
	o.Defaults()
	return o
}

// rawJWT builds a compact JWT with an arbitrary header and signature
// function, for forgeries (alg none, HMAC with a public key).
func rawJWT(header, claims map[string]any, sign func(input []byte) []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	return input + "." + base64.RawURLEncoding.EncodeToString(sign([]byte(input)))
}

// hmacWithPublicKey signs with HS256 using k's public key PEM as the secret:
// the classic algorithm-confusion forgery.
func hmacWithPublicKey(t testing.TB, k testKey) func([]byte) []byte {
	der, err := x509.MarshalPKIXPublicKey(k.key.Public())
	if err != nil {
		t.Fatal(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	return func(in []byte) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write(in)
		return m.Sum(nil)
	}
}
