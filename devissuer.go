package portcullis

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/loopback"
)

// devIssuer is the embedded token issuer of `serve --dev`: an ES256 key
// made at start, discovery documents, a JWKS and a client_credentials token
// endpoint. It exists so a first run needs no IdP; it refuses any issuer URL
// whose host is not loopback, and its tokens are for local use only.
type devIssuer struct {
	// DefaultAudience is the aud of tokens requested without a "resource"
	// parameter (set it to auth.Options.Resource).
	DefaultAudience string
	// TokenTTL is the lifetime of tokens from the token endpoint. Default 1h.
	TokenTTL time.Duration

	issuer string
	path   string // issuer URL path, without trailing slash
	key    *ecdsa.PrivateKey
	kid    string
	signer jose.Signer
	now    func() time.Time
}

// newDevIssuer makes a key and an issuer at issuerURL, which must be an
// http(s) URL on a loopback host. now nil means time.Now.
func newDevIssuer(issuerURL string, now func() time.Time) (*devIssuer, error) {
	u, err := url.Parse(issuerURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("auth: dev issuer URL %q is not an absolute http(s) URL", issuerURL)
	}
	if !loopback.Host(u.Hostname()) {
		return nil, fmt.Errorf("auth: dev issuer refuses non-loopback host %q: dev tokens must never be trusted off this machine", u.Hostname())
	}
	if now == nil {
		now = time.Now
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("auth: dev issuer key: %w", err)
	}
	var kb [8]byte
	_, _ = rand.Read(kb[:])
	kid := "dev-" + hex.EncodeToString(kb[:])
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		return nil, fmt.Errorf("auth: dev issuer signer: %w", err)
	}
	return &devIssuer{
		TokenTTL: time.Hour,
		issuer:   strings.TrimSuffix(issuerURL, "/"),
		path:     strings.TrimSuffix(u.Path, "/"),
		key:      key, kid: kid, signer: signer, now: now,
	}, nil
}

// Issuer returns the issuer URL ("iss" of its tokens).
func (d *devIssuer) Issuer() string { return d.issuer }

// IssuerOptions returns the issuer configuration that trusts d through its
// in-process key set (no HTTP round trip).
func (d *devIssuer) IssuerOptions() auth.IssuerOptions {
	return auth.IssuerOptions{Issuer: d.issuer, Algorithms: []string{"ES256"}, KeySet: d.KeySet()}
}

// KeySet returns d's public key as an in-process key set.
func (d *devIssuer) KeySet() oidc.KeySet {
	return &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{d.key.Public()}}
}

// Mint returns a signed JWT access token for subject with audience and
// scopes, valid for ttl.
func (d *devIssuer) Mint(subject, audience string, scopes []string, ttl time.Duration) (string, error) {
	if subject == "" || audience == "" || ttl <= 0 {
		return "", errors.New("auth: dev issuer: subject, audience and a positive ttl are required")
	}
	now := d.now()
	var jti [12]byte
	_, _ = rand.Read(jti[:])
	claims := map[string]any{
		"iss":       d.issuer,
		"sub":       subject,
		"aud":       audience,
		"client_id": subject,
		"iat":       now.Unix(),
		"nbf":       now.Unix(),
		"exp":       now.Add(ttl).Unix(),
		"jti":       hex.EncodeToString(jti[:]),
	}
	if len(scopes) > 0 {
		claims["scope"] = strings.Join(scopes, " ")
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	jws, err := d.signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("auth: dev issuer: signing: %w", err)
	}
	return jws.CompactSerialize()
}

// Handler serves, under the issuer URL's path (mount it there, with or
// without http.StripPrefix): /.well-known/openid-configuration,
// /.well-known/oauth-authorization-server, /jwks and /token
// (grant_type=client_credentials, any client, optional resource and scope).
//
// Listening on loopback is not enough against DNS rebinding: a web page
// whose own name the attacker points at 127.0.0.1 can reach the port,
// and its requests then carry that name. So every endpoint first checks
// that the Host header names a loopback host ("localhost" or a loopback
// IP, nothing else: not 127.0.0.1.nip.io, not *.localhost), answering 421
// Misdirected Request otherwise, and that an Origin header, when there is
// one, names a loopback http(s) origin, answering 403 otherwise.
func (d *devIssuer) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopback.Host(r.Host) {
			writeJSON(w, http.StatusMisdirectedRequest, map[string]string{"error": "invalid_request", "error_description": "the dev issuer answers only to a loopback Host"})
			return
		}
		if o := r.Header.Values("Origin"); len(o) > 0 && (len(o) > 1 || !loopbackOrigin(o[0])) {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "invalid_request", "error_description": "the dev issuer answers only to a loopback Origin"})
			return
		}
		p := r.URL.Path
		if d.path != "" {
			p = strings.TrimPrefix(p, d.path)
		}
		switch p {
		case "/.well-known/openid-configuration", "/.well-known/oauth-authorization-server":
			writeJSON(w, http.StatusOK, d.discovery())
		case "/jwks":
			writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: d.key.Public(), KeyID: d.kid, Algorithm: "ES256", Use: "sig"}}})
		case "/token":
			d.token(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

func (d *devIssuer) discovery() map[string]any {
	return map[string]any{
		"issuer":                                d.issuer,
		"jwks_uri":                              d.issuer + "/jwks",
		"token_endpoint":                        d.issuer + "/token",
		"grant_types_supported":                 []string{"client_credentials"},
		"response_types_supported":              []string{"token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"ES256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "none"},
	}
}

func (d *devIssuer) token(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "invalid_request"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != "client_credentials" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	client := r.PostForm.Get("client_id")
	if id, _, ok := r.BasicAuth(); ok {
		client, _ = url.QueryUnescape(id)
	}
	if client == "" {
		client = "dev-client"
	}
	aud := r.PostForm.Get("resource")
	if aud == "" {
		aud = d.DefaultAudience
	}
	if aud == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_target", "error_description": "resource is required"})
		return
	}
	ttl := d.TokenTTL
	if ttl <= 0 {
		ttl = time.Hour
	}
	scopes := strings.Fields(r.PostForm.Get("scope"))
	tok, err := d.Mint(client, aud, scopes, ttl)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error"})
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	resp := map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int(ttl.Seconds())}
	if len(scopes) > 0 {
		resp["scope"] = strings.Join(scopes, " ")
	}
	writeJSON(w, http.StatusOK, resp)
}

// loopbackOrigin reports whether origin (an Origin header) is an http(s)
// origin on a loopback host; "null" and anything else are not.
func loopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return false
	}
	return loopback.Host(u.Host)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
