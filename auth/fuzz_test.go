package auth

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/oidctest"
)

// knownReasons are every Reason a verifier or the middleware may report.
var knownReasons = []Reason{
	ReasonMissing, ReasonMalformed, ReasonExpired, ReasonNotYetValid, ReasonBadSignature,
	ReasonWrongAudience, ReasonWrongIssuer, ReasonUnknownKey, ReasonInsufficientScope,
	ReasonIntrospectionFailed, ReasonInactive, ReasonInvalid,
}

// fuzzVerifier returns a real verifier for one fake issuer at t0, the
// tokens it issued (which verify; the first two also carry the required
// scope), and forgeries and near misses.
//
// The fuzzing workers run this setup again with new keys and a new issuer
// URL, so there a seed's issued token is just another refused one; the
// issued tokens are checked as such in the process that made them.
func fuzzVerifier(f *testing.F) (v Verifier, o Options, issued, bad []string) {
	key := oidctest.NewECKey("k1")
	iss := newFakeIssuer(f, key)
	o = testOptions(iss)
	o.RequiredScopes = []string{"mcp:tools"}
	var err error
	v, err = NewVerifier(context.Background(), o, Deps{Now: newClock().Now})
	if err != nil {
		f.Fatal(err)
	}
	good := key.Sign(iss.Claims(nil))
	issued = []string{
		good,
		// Scopes are the middleware's to check.
		key.Sign(iss.Claims(map[string]any{"scope": "read"})),
	}
	other := oidctest.NewECKey("k1") // same kid, unpublished key
	rsa := oidctest.NewRSAKey("k2")
	bad = []string{
		// RFC 9068 requires sub: without it every such token of an issuer
		// would share one identity.
		key.Sign(iss.Claims(map[string]any{"sub": nil})),
		key.Sign(iss.Claims(map[string]any{"aud": "https://other.example/mcp"})),
		key.Sign(iss.Claims(map[string]any{"exp": t0.Add(-time.Hour).Unix()})),
		key.Sign(iss.Claims(map[string]any{"iss": "https://evil.example"})),
		other.Sign(iss.Claims(nil)),
		rsa.Sign(iss.Claims(nil)),
		oidctest.Forge(map[string]any{"alg": "none", "kid": "k1"}, iss.Claims(nil), func([]byte) []byte { return nil }),
		oidctest.Forge(map[string]any{"alg": "HS256", "kid": "k1"}, iss.Claims(nil), oidctest.HMACWithPublicKey(key)),
		oidctest.AlterSignature(good),
		good + ".x",
		"opaque-token-0123456789",
	}
	return v, o, issued, bad
}

// FuzzVerify verifies arbitrary tokens. Invariants: no panic; only the
// genuine token verifies; every refusal carries a known Reason and no
// principal.
func FuzzVerify(f *testing.F) {
	v, _, good, bad := fuzzVerifier(f)
	for _, tok := range append(slices.Clone(good), bad...) {
		f.Add(tok)
	}
	f.Add("")
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJFUzI1NiJ9.e30.")
	f.Fuzz(func(t *testing.T, token string) {
		p, err := v.Verify(context.Background(), token)
		if slices.Contains(good, token) {
			if err != nil || p == nil {
				t.Fatalf("the genuine token is refused: %v", err)
			}
			return
		}
		if err == nil || p != nil {
			t.Fatalf("Verify(%q) = %+v, %v: a token nobody issued authenticated", token, p, err)
		}
		if r := ReasonOf(err); !slices.Contains(knownReasons, r) {
			t.Fatalf("reason %q is not a known reason", r)
		}
	})
}

// FuzzMiddleware sends arbitrary Authorization headers and query strings
// through the bearer middleware. Invariants: no panic; only the genuine
// token reaches the handler; a refusal is 400, 401 or 403 with a Bearer
// challenge naming the metadata, reports a known reason, and the log
// never holds the token.
func FuzzMiddleware(f *testing.F) {
	v, o, issued, bad := fuzzVerifier(f)
	good := issued[:1] // with the required scope
	for _, tok := range append(slices.Clone(issued), bad...) {
		f.Add("Bearer "+tok, "", "")
	}
	f.Add("", "", "")
	f.Add("Basic eDp5", "", "")
	f.Add("Bearer", "", "")
	f.Add("bearer    x", "", "")
	f.Add(`Bearer a"b`, "", "")
	f.Add("Bearer "+good[0], "Bearer "+good[0], "")
	f.Add("Bearer "+good[0], "", "access_token="+good[0])
	f.Add("Bearer abc==", "", "")
	f.Add("Bearer "+strings.Repeat("A", MaxTokenSize+1), "", "")
	f.Fuzz(func(t *testing.T, authz, second, query string) {
		var logs bytes.Buffer
		var events []Event
		hook := func(_ context.Context, e Event) { events = append(events, e) }
		reached := false
		h := Middleware(v, o, testMetadataURL, Deps{Hook: hook, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})(
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached = true
				if _, ok := PrincipalFrom(r.Context()); !ok {
					t.Fatal("the handler was reached without a principal")
				}
			}))
		req := httptest.NewRequest(http.MethodPost, "https://mcp.example.com/mcp", nil)
		if q, err := url.ParseQuery(query); err == nil {
			req.URL.RawQuery = q.Encode()
		}
		for _, a := range []string{authz, second} {
			if a != "" && validHeader(a) {
				req.Header.Add("Authorization", a)
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)

		scheme, token, _ := strings.Cut(strings.TrimSpace(req.Header.Get("Authorization")), " ")
		genuine := len(req.Header.Values("Authorization")) == 1 && !req.URL.Query().Has("access_token") &&
			strings.EqualFold(scheme, "Bearer") && slices.Contains(good, strings.TrimSpace(token))
		if reached != genuine {
			t.Fatalf("handler reached = %v for Authorization %q and query %q", reached, req.Header.Values("Authorization"), req.URL.RawQuery)
		}
		if len(events) != 1 {
			t.Fatalf("%d events, want 1", len(events))
		}
		if genuine {
			if events[0].Outcome != OutcomeAllowed {
				t.Fatalf("event %+v for the genuine token", events[0])
			}
			return
		}
		if e := events[0]; e.Outcome != OutcomeDenied || !slices.Contains(knownReasons, e.Reason) {
			t.Fatalf("event %+v: want denied with a known reason", e)
		}
		switch w.Code {
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden:
		default:
			t.Fatalf("status %d for a refused request", w.Code)
		}
		if c := w.Header().Get("WWW-Authenticate"); !strings.HasPrefix(c, "Bearer ") || !strings.Contains(c, `resource_metadata="`+testMetadataURL+`"`) {
			t.Fatalf("WWW-Authenticate = %q", c)
		}
		for _, a := range req.Header.Values("Authorization") {
			if tok := strings.TrimSpace(a[min(len(a), len("Bearer ")):]); len(tok) >= 16 && strings.Contains(logs.String(), tok) {
				t.Fatalf("the log holds the token:\n%s", logs.String())
			}
		}
	})
}

// validHeader reports whether v survives as an HTTP header value.
func validHeader(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
