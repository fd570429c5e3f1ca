package auth

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/oidctest"
	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
)

// logLines counts the log lines per message and returns the lines whose
// message is msg.
func logLines(t *testing.T, logs string, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if line["msg"] == msg {
			out = append(out, line)
		}
	}
	return out
}

const (
	msgUnreachable = "auth: issuer unreachable: cannot fetch its keys; tokens with keys already held still verify"
	msgRecovered   = "auth: issuer keys fetched again"
)

// TestIssuerReachabilityLoggedOnce shows that an issuer whose keys cannot
// be fetched is logged once when that starts (at start, and again in a
// background refresh) and once when it ends, with its URL and the error;
// not on every probe, request or retry in between.
func TestIssuerReachabilityLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const issuer = "https://idp.example.com/realms/corp"
		k := oidctest.NewRSAKey("k1")
		idp := oidctest.New(oidctest.Options{URL: issuer, Discovery: oidctest.NoDiscovery, Keys: []*oidctest.Key{k}})
		idp.SetFailure(oidctest.Refused)
		var logs syncbuf.Buffer
		clk := newClock()
		o := Options{
			Resource: testResource,
			Issuers:  []IssuerOptions{{Issuer: issuer, JWKSURL: idp.JWKSURL()}},
		}
		o.Defaults()
		v, err := NewVerifier(context.Background(), o, Deps{HTTPClient: idp.Client(), Now: clk.Now, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		ready := v.(Readier).Ready
		// Each token is new, so the verified-token cache never answers.
		n := 0
		token := func() string {
			n++
			return k.Sign(map[string]any{"iss": issuer, "sub": "alice", "aud": testResource,
				"exp": t0.Add(24 * time.Hour).Unix(), "iat": t0.Unix(), "jti": strings.Repeat("x", n)})
		}
		counts := func(wantDown, wantUp int) {
			t.Helper()
			down, up := logLines(t, logs.String(), msgUnreachable), logLines(t, logs.String(), msgRecovered)
			if len(down) != wantDown || len(up) != wantUp {
				t.Fatalf("logged %d unreachable and %d recovered lines, want %d and %d:\n%s", len(down), len(up), wantDown, wantUp, logs.String())
			}
			for _, l := range append(down, up...) {
				if l["issuer"] != issuer {
					t.Errorf("log line without the issuer URL: %v", l)
				}
			}
			for _, l := range down {
				if e, _ := l["error"].(string); !strings.Contains(e, "connection refused") || l["level"] != "WARN" {
					t.Errorf("unreachable line without the error, or not a warning: %v", l)
				}
			}
		}

		// At start the IdP is down: the first probe logs it.
		if err := ready(ctx); err == nil {
			t.Fatal("Ready with the IdP down: want an error")
		}
		counts(1, 0)
		// More probes and requests, each allowed to fetch again: no more lines.
		for range 5 {
			clk.Advance(o.JWKSRefreshInterval)
			_ = ready(ctx)
			clk.Advance(o.JWKSRefreshInterval)
			if _, err := v.Verify(ctx, token()); ReasonOf(err) != ReasonUnknownKey {
				t.Fatalf("Verify with the IdP down: %v, want unknown_key", err)
			}
		}
		if got := idp.JWKSFetches(); got != 11 {
			t.Fatalf("fetches = %d, want 11: every probe and request tried", got)
		}
		counts(1, 0)

		// The IdP is back: one line.
		idp.SetFailure(oidctest.Up)
		clk.Advance(o.JWKSRefreshInterval)
		if err := ready(ctx); err != nil {
			t.Fatalf("Ready with the IdP up: %v", err)
		}
		for range 3 {
			if _, err := v.Verify(ctx, token()); err != nil {
				t.Fatal(err)
			}
		}
		counts(1, 1)

		// Down during a background refresh of stale keys: logged once,
		// and the keys held keep verifying.
		idp.SetFailure(oidctest.Refused)
		for range 3 {
			clk.Advance(o.JWKSMaxAge)
			if _, err := v.Verify(ctx, token()); err != nil {
				t.Fatalf("Verify with stale keys and the IdP down: %v", err)
			}
			synctest.Wait() // the background refresh has run
		}
		if got := idp.JWKSFetches(); got != 15 {
			t.Fatalf("fetches = %d, want 15: three background refreshes", got)
		}
		counts(2, 1)

		// Back again, noticed by a background refresh.
		idp.SetFailure(oidctest.Up)
		clk.Advance(o.JWKSMaxAge)
		if _, err := v.Verify(ctx, token()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		counts(2, 2)
	})
}
