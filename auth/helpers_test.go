package auth

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/oidctest"
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

// newFakeIssuer starts an issuer publishing keys whose Claims are
// testClaims.
func newFakeIssuer(t testing.TB, keys ...*oidctest.Key) *oidctest.Issuer {
	t.Helper()
	return oidctest.Start(t, oidctest.Options{Keys: keys, Claims: testClaims()})
}

// testClaims are a valid access token's claims for testResource at t0,
// but for the issuer.
func testClaims() map[string]any {
	return map[string]any{
		"sub":       "alice",
		"aud":       testResource,
		"exp":       t0.Add(time.Hour).Unix(),
		"iat":       t0.Add(-time.Minute).Unix(),
		"nbf":       t0.Add(-time.Minute).Unix(),
		"client_id": "claude",
		"scope":     "mcp:tools read",
	}
}

const testResource = "https://mcp.example.com/mcp"

// testOptions configures one issuer f.
func testOptions(f *oidctest.Issuer) Options {
	o := Options{
		Resource: testResource,
		Issuers:  []IssuerOptions{{Issuer: f.URL(), Audiences: []string{"api://portcullis-app-id"}}},
	}
	o.Defaults()
	return o
}

// writeJSON answers with v as JSON, as the fake servers of these tests do.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
