// Package oidctest is an OpenID provider for tests: signing keys, an
// issuer that serves discovery and a JWKS, and access tokens signed the
// way an identity provider signs them.
//
// It is in the spirit of go-oidc's oidctest, with what Portcullis's tests
// need besides: RFC 8414 discovery, issuers with a path, key rotation,
// an endpoint that fails on demand, a count of key-set fetches, and a
// transport that serves the issuer in memory, so background fetches run
// inside a [testing/synctest] bubble.
//
// Start an issuer with a key, point the code under test at it and sign
// tokens:
//
//	k := oidctest.NewRSAKey("k1")
//	idp := oidctest.Start(t, oidctest.Options{Keys: []*oidctest.Key{k}})
//	token := k.Sign(idp.Claims(map[string]any{"sub": "alice"}))
//
// Functions here panic rather than return errors: a failure is a broken
// test machine, not a case to handle. Nothing here belongs in production
// code; the load-test harness uses it as its stand-in IdP.
package oidctest

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
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// Key is a signing key with its key ID and algorithm.
type Key struct {
	ID     string
	Alg    jose.SignatureAlgorithm
	Signer crypto.Signer
}

// NewRSAKey returns a new 2048-bit RSA key for RS256 named kid.
func NewRSAKey(kid string) *Key {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic("oidctest: " + err.Error())
	}
	return &Key{ID: kid, Alg: jose.RS256, Signer: k}
}

// NewECKey returns a new P-256 key for ES256 named kid.
func NewECKey(kid string) *Key {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic("oidctest: " + err.Error())
	}
	return &Key{ID: kid, Alg: jose.ES256, Signer: k}
}

// Public returns k's public key.
func (k *Key) Public() crypto.PublicKey { return k.Signer.Public() }

// JWK returns k's public key as a JWKS entry (use "sig").
func (k *Key) JWK() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.Public(), KeyID: k.ID, Algorithm: string(k.Alg), Use: "sig"}
}

// TokenOption changes how [Key.Sign] signs.
type TokenOption func(*jose.SignerOptions)

// Type sets the JOSE header typ; "" leaves it out. The default is
// "at+jwt", an access token (RFC 9068); an ID token is "JWT".
func Type(typ string) TokenOption {
	return func(o *jose.SignerOptions) {
		if typ == "" {
			delete(o.ExtraHeaders, jose.HeaderType)
			return
		}
		o.WithType(jose.ContentType(typ))
	}
}

// Sign returns claims (marshalled to JSON) as a compact JWT signed with k,
// with k's kid and the header typ "at+jwt" unless an option says otherwise.
func (k *Key) Sign(claims any, opts ...TokenOption) string {
	so := (&jose.SignerOptions{}).WithType("at+jwt")
	for _, o := range opts {
		o(so)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.Alg, Key: jose.JSONWebKey{Key: k.Signer, KeyID: k.ID}}, so)
	if err != nil {
		panic("oidctest: " + err.Error())
	}
	b, err := json.Marshal(claims)
	if err != nil {
		panic("oidctest: " + err.Error())
	}
	jws, err := s.Sign(b)
	if err != nil {
		panic("oidctest: " + err.Error())
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		panic("oidctest: " + err.Error())
	}
	return out
}

// Forge returns a compact JWT with any header, its signature made by sign
// over the signing input: for tokens no honest issuer makes (alg none,
// HMAC keyed with a public key).
func Forge(header, claims map[string]any, sign func(input []byte) []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	return input + "." + base64.RawURLEncoding.EncodeToString(sign([]byte(input)))
}

// AlterSignature returns token with the first character of its signature
// changed, so that the signature no longer verifies. Changing the last
// characters is not enough: the last base64url character of an RS256 or
// ES256 signature carries two bits and four padding bits that decoders
// ignore, so a changed ending decodes to the same signature about once in
// 250 tokens.
func AlterSignature(token string) string {
	i := strings.LastIndexByte(token, '.') + 1
	if i == 0 || i == len(token) {
		panic("oidctest: AlterSignature: not a signed compact JWT")
	}
	c := byte('A')
	if token[i] == c {
		c = 'B'
	}
	return token[:i] + string(c) + token[i+1:]
}

// HMACWithPublicKey returns a signature function for [Forge] that signs
// HS256 with k's public key PEM as the secret: the algorithm-confusion
// forgery.
func HMACWithPublicKey(k *Key) func([]byte) []byte {
	der, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		panic("oidctest: " + err.Error())
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	return func(in []byte) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write(in)
		return m.Sum(nil)
	}
}

// Discovery says which metadata document an issuer serves.
type Discovery int

const (
	// OpenIDConfiguration serves /.well-known/openid-configuration under
	// the issuer URL (OpenID Connect Discovery).
	OpenIDConfiguration Discovery = iota
	// RFC8414 serves only /.well-known/oauth-authorization-server with the
	// issuer's path after it (RFC 8414 section 3.1).
	RFC8414
	// NoDiscovery serves no metadata: clients must be given the JWKS URL.
	NoDiscovery
)

// Failure is how an issuer's endpoints fail; see [Issuer.SetFailure].
type Failure int

const (
	// Up answers normally.
	Up Failure = iota
	// BadGateway answers every request with 502 Bad Gateway.
	BadGateway
	// Refused fails every request of [Issuer.Client] with "connection
	// refused"; over the network the connection is dropped.
	Refused
)

// Options configures an [Issuer]. The zero value is an issuer with no keys
// at an httptest server's URL, serving OpenID Connect discovery.
type Options struct {
	// Keys are the keys the JWKS publishes at start.
	Keys []*Key
	// URL, when set, is the issuer identifier of an issuer served only in
	// memory by [Issuer.Client], at any host; no port is opened.
	URL string
	// Path is appended to the httptest server's URL to make the issuer
	// identifier ("/tenant"); it is ignored when URL is set.
	Path string
	// Discovery is the metadata document served.
	Discovery Discovery
	// Metadata is applied to the metadata document as [Override] does:
	// members set, replaced, or (nil) deleted, for an authorization server
	// that names another issuer or lacks PKCE.
	Metadata map[string]any
	// Claims are the claims [Issuer.Claims] starts from; "iss" is the
	// issuer's URL unless Claims sets it.
	Claims map[string]any
}

// Issuer is an OpenID provider: metadata (see [Discovery]) and a JWKS at
// URL()+"/jwks". It is an [http.Handler]. Its methods are safe for
// concurrent use.
type Issuer struct {
	url       string
	path      string // the issuer URL's path, "" or "/tenant"
	discovery Discovery
	override  map[string]any
	claims    map[string]any
	srv       *httptest.Server

	mu      sync.Mutex
	keys    []*Key
	failure atomic.Int32
	fetches atomic.Int32
}

// New returns an issuer configured by o; unless o.URL is set it listens on
// a loopback httptest server, which Close stops.
func New(o Options) *Issuer {
	is := &Issuer{discovery: o.Discovery, override: o.Metadata, claims: o.Claims, keys: append([]*Key(nil), o.Keys...)}
	if o.URL != "" {
		is.url = strings.TrimSuffix(o.URL, "/")
	} else {
		is.srv = httptest.NewServer(is)
		is.url = is.srv.URL + strings.TrimSuffix(o.Path, "/")
	}
	u, err := url.Parse(is.url)
	if err != nil {
		panic("oidctest: issuer URL: " + err.Error())
	}
	is.path = u.Path
	return is
}

// Start is [New] with Close registered as tb's cleanup.
func Start(tb testing.TB, o Options) *Issuer {
	tb.Helper()
	is := New(o)
	tb.Cleanup(is.Close)
	return is
}

// Close stops the issuer's server, if it has one.
func (is *Issuer) Close() {
	if is.srv != nil {
		is.srv.Close()
	}
}

// URL returns the issuer identifier.
func (is *Issuer) URL() string { return is.url }

// JWKSURL returns the URL of the issuer's key set.
func (is *Issuer) JWKSURL() string { return is.url + "/jwks" }

// Client returns an HTTP client that serves every request with the issuer
// in memory, whatever its host: fetches leave no goroutine behind and
// block on nothing, so they suit [testing/synctest].
func (is *Issuer) Client() *http.Client { return &http.Client{Transport: memTransport{is}} }

// SetKeys replaces the keys the JWKS publishes.
func (is *Issuer) SetKeys(keys ...*Key) {
	is.mu.Lock()
	is.keys = append([]*Key(nil), keys...)
	is.mu.Unlock()
}

// Publish adds k to the keys the JWKS publishes: a key rotation.
func (is *Issuer) Publish(k *Key) {
	is.mu.Lock()
	is.keys = append(is.keys, k)
	is.mu.Unlock()
}

// SetFailure makes every endpoint fail as f says, from the next request.
func (is *Issuer) SetFailure(f Failure) { is.failure.Store(int32(f)) }

// JWKSFetches returns how many requests the JWKS endpoint has had,
// failed ones included.
func (is *Issuer) JWKSFetches() int32 { return is.fetches.Load() }

// Claims returns the claims of o.Claims, with "iss" set to the issuer,
// and over applied on top as [Override] does.
func (is *Issuer) Claims(over map[string]any) map[string]any {
	c := map[string]any{"iss": is.url}
	maps.Copy(c, is.claims)
	return Override(c, over)
}

// Override sets the members of over in base and returns base; a nil value
// deletes the member. It makes the variants of a valid claim set or
// introspection answer that tests refuse.
func Override(base, over map[string]any) map[string]any {
	for k, v := range over {
		if v == nil {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	return base
}

// ServeHTTP serves the metadata document and the JWKS.
func (is *Issuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	jwks := r.URL.Path == is.path+"/jwks"
	if jwks {
		is.fetches.Add(1)
	}
	switch Failure(is.failure.Load()) {
	case BadGateway:
		http.Error(w, "down", http.StatusBadGateway)
		return
	case Refused:
		panic(http.ErrAbortHandler)
	}
	switch {
	case jwks:
		is.mu.Lock()
		set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, len(is.keys))}
		for _, k := range is.keys {
			set.Keys = append(set.Keys, k.JWK())
		}
		is.mu.Unlock()
		writeJSON(w, set)
	case is.discovery == OpenIDConfiguration && r.URL.Path == is.path+"/.well-known/openid-configuration":
		writeJSON(w, is.metadata(map[string]any{
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		}))
	case is.discovery == RFC8414 && r.URL.Path == "/.well-known/oauth-authorization-server"+is.path:
		writeJSON(w, is.metadata(nil))
	default:
		http.NotFound(w, r)
	}
}

func (is *Issuer) metadata(extra map[string]any) map[string]any {
	m := map[string]any{
		"issuer":                           is.url,
		"jwks_uri":                         is.JWKSURL(),
		"authorization_endpoint":           is.url + "/authorize",
		"token_endpoint":                   is.url + "/token",
		"response_types_supported":         []string{"code"},
		"code_challenge_methods_supported": []string{"S256"},
	}
	maps.Copy(m, extra)
	return Override(m, is.override)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// memTransport serves requests with an issuer's handler, in memory.
type memTransport struct{ is *Issuer }

func (m memTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if Failure(m.is.failure.Load()) == Refused {
		if r.URL.Path == m.is.path+"/jwks" {
			m.is.fetches.Add(1)
		}
		return nil, errors.New("dial tcp " + r.URL.Host + ": connect: connection refused")
	}
	rec := httptest.NewRecorder()
	m.is.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}
