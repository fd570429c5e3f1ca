package jwks

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// testKey is a signing key and the JWKS entry of its public half.
type testKey struct {
	kid  string
	priv *ecdsa.PrivateKey
}

func newKey(t *testing.T, kid string) *testKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &testKey{kid: kid, priv: priv}
}

// jwk is the key's JWKS entry.
func (k *testKey) jwk() json.RawMessage {
	b, err := json.Marshal(jose.JSONWebKey{Key: &k.priv.PublicKey, KeyID: k.kid, Algorithm: "ES256", Use: "sig"})
	if err != nil {
		panic(err)
	}
	return b
}

// sign returns a JWS of payload signed by k, naming kid in its header
// (none when kid is empty).
func (k *testKey) sign(t *testing.T, kid string) *jose.JSONWebSignature {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: k.priv, KeyID: kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := sig.Sign([]byte(`{"sub":"alice"}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	jws, err := jose.ParseSigned(raw, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	return jws
}

// Discovery modes of a keyServer.
const (
	discoverOIDC    = "oidc"
	discoverRFC8414 = "rfc8414"
	discoverNone    = "none"
)

// keyServer is an issuer serving a JWKS at /keys and, as asked, its
// discovery documents; it counts the JWKS fetches and fails on demand.
type keyServer struct {
	issuer    string // set once it listens
	path      string // the issuer's path, "" or "/tenant"
	discovery string
	otherIss  bool // metadata names another issuer

	mu      sync.Mutex
	keys    []json.RawMessage
	status  int // 0: 200
	fetches int
}

func (s *keyServer) setKeys(keys ...json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = keys
}

func (s *keyServer) setStatus(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
}

func (s *keyServer) fetchCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetches
}

func (s *keyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path == s.path+"/keys" {
		s.fetches++
	}
	if s.status != 0 {
		w.WriteHeader(s.status)
		return
	}
	iss := s.issuer
	if s.otherIss {
		iss += "/other"
	}
	meta := map[string]string{"issuer": iss, "jwks_uri": s.issuer + "/keys"}
	switch {
	case r.URL.Path == s.path+"/keys":
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": s.keys})
	case s.discovery == discoverOIDC && r.URL.Path == s.path+"/.well-known/openid-configuration",
		s.discovery == discoverRFC8414 && r.URL.Path == "/.well-known/oauth-authorization-server"+s.path:
		_ = json.NewEncoder(w).Encode(meta)
	default:
		http.NotFound(w, r)
	}
}

// start serves s on an httptest server.
func (s *keyServer) start(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.issuer = srv.URL + s.path
	return srv
}

// clock is a clock the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestVerify(t *testing.T) {
	a, b := newKey(t, "a"), newKey(t, "b")
	impostor := newKey(t, "a") // another key under a's kid
	encA, err := json.Marshal(jose.JSONWebKey{Key: &a.priv.PublicKey, KeyID: "a", Use: "enc"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		served  []json.RawMessage
		status  int
		jws     *jose.JSONWebSignature
		wantErr error // nil: verifies
	}{
		{name: "known kid", served: []json.RawMessage{a.jwk(), b.jwk()}, jws: a.sign(t, "a")},
		{name: "no kid: every key is tried", served: []json.RawMessage{b.jwk(), a.jwk()}, jws: a.sign(t, "")},
		{name: "unknown kid", served: []json.RawMessage{a.jwk()}, jws: b.sign(t, "b"), wantErr: ErrUnknownKey},
		{name: "another key under a known kid", served: []json.RawMessage{a.jwk()}, jws: impostor.sign(t, "a"), wantErr: ErrBadSignature},
		{name: "a key type go-jose does not know is skipped", served: []json.RawMessage{json.RawMessage(`{"kty":"XYZ","kid":"x"}`), a.jwk()}, jws: a.sign(t, "a")},
		{name: "encryption and symmetric keys are never used", served: []json.RawMessage{encA, json.RawMessage(`{"kty":"oct","kid":"a","k":"c2VjcmV0"}`)}, jws: a.sign(t, "a"), wantErr: ErrUnavailable},
		{name: "issuer down", served: []json.RawMessage{a.jwk()}, status: http.StatusBadGateway, jws: a.sign(t, "a"), wantErr: ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks := &keyServer{discovery: discoverNone}
			ks.start(t)
			ks.setKeys(tt.served...)
			ks.setStatus(tt.status)
			s := New(Options{Issuer: ks.issuer, URL: ks.issuer + "/keys", Now: newClock().now, RefreshInterval: 10 * time.Second})
			payload, err := s.Verify(context.Background(), tt.jws)
			if tt.wantErr == nil && (err != nil || string(payload) != `{"sub":"alice"}`) {
				t.Fatalf("Verify = %q, %v; want the payload", payload, err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("Verify error = %v, want %v", err, tt.wantErr)
			}
			if n := ks.fetchCount(); n != 1 {
				t.Errorf("%d fetches, want 1", n)
			}
		})
	}
}

func TestDiscovery(t *testing.T) {
	k := newKey(t, "k")
	tests := []struct {
		name      string
		path      string
		discovery string
		otherIss  bool
		check     func(string) error
		wantErr   string // "": verifies
	}{
		{name: "OpenID Connect discovery", discovery: discoverOIDC},
		{name: "RFC 8414 metadata of an issuer with a path", path: "/tenant", discovery: discoverRFC8414},
		{name: "no discovery document", discovery: discoverNone, wantErr: "discovery for"},
		{name: "metadata of another issuer", path: "/tenant", discovery: discoverRFC8414, otherIss: true, wantErr: "metadata names issuer"},
		{name: "CheckURL refuses the jwks_uri", discovery: discoverOIDC, check: func(string) error { return errors.New("not this one") }, wantErr: "not this one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks := &keyServer{path: tt.path, discovery: tt.discovery, otherIss: tt.otherIss}
			ks.start(t)
			ks.setKeys(k.jwk())
			s := New(Options{Issuer: ks.issuer, CheckURL: tt.check, Now: newClock().now})
			_, err := s.Verify(context.Background(), k.sign(t, "k"))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				// The discovered URL is kept: a second fetch discovers nothing.
				ks.setStatus(http.StatusNotFound)
				if _, err := s.Keys(context.Background(), "other"); err == nil || !strings.Contains(err.Error(), "fetching JWKS") {
					t.Errorf("second fetch: %v, want a JWKS fetch error", err)
				}
				return
			}
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Verify error = %v, want ErrUnavailable naming %q", err, tt.wantErr)
			}
			if n := ks.fetchCount(); n != 0 {
				t.Errorf("%d JWKS fetches, want none", n)
			}
		})
	}
}

// TestRefreshInterval: a kid the issuer rotates to is found once the
// interval has passed, and a flood of made-up kids costs the issuer one
// fetch per interval, however many callers.
func TestRefreshInterval(t *testing.T) {
	a, b := newKey(t, "a"), newKey(t, "b")
	ks := &keyServer{discovery: discoverNone}
	ks.start(t)
	ks.setKeys(a.jwk())
	clk := newClock()
	s := New(Options{Issuer: ks.issuer, URL: ks.issuer + "/keys", Now: clk.now, RefreshInterval: 10 * time.Second})
	ctx := context.Background()
	if _, err := s.Verify(ctx, a.sign(t, "a")); err != nil {
		t.Fatal(err)
	}
	ks.setKeys(a.jwk(), b.jwk())
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if _, err := s.Keys(ctx, fmt.Sprint("made-up-", i)); !errors.Is(err, ErrUnknownKey) {
				t.Errorf("made-up kid: %v, want ErrUnknownKey", err)
			}
		})
	}
	wg.Wait()
	if _, err := s.Verify(ctx, b.sign(t, "b")); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("rotated key within the interval: %v, want ErrUnknownKey", err)
	}
	if n := ks.fetchCount(); n != 1 {
		t.Fatalf("%d fetches within the interval, want 1", n)
	}
	clk.advance(10 * time.Second)
	if _, err := s.Verify(ctx, b.sign(t, "b")); err != nil {
		t.Fatalf("rotated key after the interval: %v", err)
	}
	if _, err := s.Verify(ctx, a.sign(t, "a")); err != nil {
		t.Fatalf("old key after the rotation: %v", err)
	}
	if n := ks.fetchCount(); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}
}

// TestIssuerDown: the keys held keep verifying while the issuer is down;
// a kid not held is unavailable until a fetch works again; Changed is
// told once when fetching starts failing and once when it works again.
func TestIssuerDown(t *testing.T) {
	a, b := newKey(t, "a"), newKey(t, "b")
	ks := &keyServer{discovery: discoverNone}
	ks.start(t)
	ks.setKeys(a.jwk())
	clk := newClock()
	var changes []string
	s := New(Options{Issuer: ks.issuer, URL: ks.issuer + "/keys", Now: clk.now, RefreshInterval: 10 * time.Second,
		Changed: func(err error, held int) { changes = append(changes, fmt.Sprintf("%v held %d", err != nil, held)) }})
	ctx := context.Background()
	if err := s.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	ks.setStatus(http.StatusBadGateway)
	for range 3 {
		clk.advance(10 * time.Second)
		if _, err := s.Verify(ctx, a.sign(t, "a")); err != nil {
			t.Fatalf("held key with the issuer down: %v", err)
		}
		if _, err := s.Verify(ctx, b.sign(t, "b")); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "502") {
			t.Fatalf("key not held with the issuer down: %v, want ErrUnavailable with the fetch's error", err)
		}
	}
	if err := s.Ready(ctx); err != nil {
		t.Errorf("Ready with keys held and the issuer down: %v", err)
	}
	ks.setStatus(0)
	ks.setKeys(a.jwk(), b.jwk())
	if _, err := s.Verify(ctx, b.sign(t, "b")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("issuer back, within the interval: %v, want ErrUnavailable (not asked yet)", err)
	}
	clk.advance(10 * time.Second)
	if _, err := s.Verify(ctx, b.sign(t, "b")); err != nil {
		t.Fatalf("issuer back: %v", err)
	}
	if got, want := strings.Join(changes, ", "), "true held 1, false held 2"; got != want {
		t.Errorf("Changed told %q, want %q", got, want)
	}
	if n := ks.fetchCount(); n != 5 {
		t.Errorf("%d fetches, want 5", n)
	}
}

func TestReady(t *testing.T) {
	k := newKey(t, "k")
	tests := []struct {
		name        string
		status      int
		wantErr     bool
		wantFetches int // after two calls within one interval
	}{
		{name: "issuer up", wantFetches: 1},
		{name: "issuer down", status: http.StatusServiceUnavailable, wantErr: true, wantFetches: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks := &keyServer{discovery: discoverNone}
			ks.start(t)
			ks.setKeys(k.jwk())
			ks.setStatus(tt.status)
			s := New(Options{Issuer: ks.issuer, URL: ks.issuer + "/keys", Now: newClock().now, RefreshInterval: 10 * time.Second})
			for i := range 2 {
				err := s.Ready(context.Background())
				if tt.wantErr && (!errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "503")) {
					t.Fatalf("Ready %d = %v, want ErrUnavailable with the fetch's error", i, err)
				}
				if !tt.wantErr && err != nil {
					t.Fatalf("Ready %d: %v", i, err)
				}
			}
			if n := ks.fetchCount(); n != tt.wantFetches {
				t.Errorf("%d fetches, want %d", n, tt.wantFetches)
			}
		})
	}
}

// handlerTransport serves requests with a handler in memory, so a
// background fetch runs inside a synctest bubble.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// TestStaleKeysAreFetchedAgain: keys older than MaxAge are fetched again
// in the background, without making the caller wait, so a key the issuer
// removed stops verifying.
func TestStaleKeysAreFetchedAgain(t *testing.T) {
	a, b := newKey(t, "a"), newKey(t, "b")
	synctest.Test(t, func(t *testing.T) {
		ks := &keyServer{discovery: discoverNone, issuer: "https://idp.example.com"}
		ks.setKeys(a.jwk())
		clk := newClock()
		s := New(Options{Issuer: ks.issuer, URL: ks.issuer + "/keys", Client: &http.Client{Transport: handlerTransport{ks}},
			Now: clk.now, RefreshInterval: 10 * time.Second, MaxAge: time.Hour})
		ctx := context.Background()
		if _, err := s.Verify(ctx, a.sign(t, "a")); err != nil {
			t.Fatal(err)
		}
		ks.setKeys(b.jwk())
		clk.advance(59 * time.Minute)
		if _, err := s.Verify(ctx, a.sign(t, "a")); err != nil {
			t.Fatalf("within MaxAge: %v", err)
		}
		synctest.Wait()
		if n := ks.fetchCount(); n != 1 {
			t.Fatalf("%d fetches within MaxAge, want 1", n)
		}
		clk.advance(2 * time.Minute)
		if _, err := s.Verify(ctx, a.sign(t, "a")); err != nil {
			t.Fatalf("stale keys verify while the background fetch runs: %v", err)
		}
		synctest.Wait()
		if n := ks.fetchCount(); n != 2 {
			t.Fatalf("%d fetches past MaxAge, want 2", n)
		}
		if _, err := s.Verify(ctx, a.sign(t, "a")); !errors.Is(err, ErrUnknownKey) {
			t.Errorf("removed key after the background fetch: %v, want ErrUnknownKey", err)
		}
	})
}

func TestRFC8414URL(t *testing.T) {
	tests := []struct {
		name, issuer, want string
	}{
		{name: "no path", issuer: "https://as.example.com", want: "https://as.example.com/.well-known/oauth-authorization-server"},
		{name: "path", issuer: "https://as.example.com/tenant/1", want: "https://as.example.com/.well-known/oauth-authorization-server/tenant/1"},
		{name: "trailing slash", issuer: "https://as.example.com/tenant/", want: "https://as.example.com/.well-known/oauth-authorization-server/tenant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rfc8414URL(tt.issuer); got != tt.want {
				t.Errorf("rfc8414URL(%q) = %q, want %q", tt.issuer, got, tt.want)
			}
		})
	}
}
