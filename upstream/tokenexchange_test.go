package upstream

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeClock is a settable clock for the exchanged tokens' expiry.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// exchangeAS is a fake authorization server: it exchanges "RAW-<who>" for
// "xchg-<who>-<n>" (valid 300s), refuses "RAW-denied", and issues
// "cc-token" to the client-credentials grant.
type exchangeAS struct {
	mu        sync.Mutex
	n         int
	exchanges map[string]int // by subject token
}

func (a *exchangeAS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	if id, sec, ok := r.BasicAuth(); !ok || id != "portcullis" || sec != "s3cret" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		fmt.Fprint(w, `{"error":"invalid_client"}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.PostForm.Get("grant_type") {
	case "client_credentials":
		fmt.Fprint(w, `{"access_token":"cc-token","token_type":"Bearer","expires_in":3600}`)
		return
	case "urn:ietf:params:oauth:grant-type:token-exchange":
	default:
		w.WriteHeader(400)
		fmt.Fprint(w, `{"error":"unsupported_grant_type"}`)
		return
	}
	sub := r.PostForm.Get("subject_token")
	if sub == "RAW-denied" || !strings.HasPrefix(sub, "RAW-") || r.PostForm.Get("audience") != "tickets" {
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"error":"invalid_grant","error_description":"cannot exchange %s"}`, sub)
		return
	}
	a.mu.Lock()
	a.n++
	a.exchanges[sub]++
	n := a.n
	a.mu.Unlock()
	fmt.Fprintf(w, `{"access_token":"xchg-%s-%d","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer","expires_in":300}`, strings.TrimPrefix(sub, "RAW-"), n)
}

func (a *exchangeAS) count(sub string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.exchanges[sub]
}

// authUpstream is an http MCP server whose tool "who" answers with the
// Authorization header of the call; it records every request's.
type authUpstream struct {
	mu    sync.Mutex
	auths []string
	// stateless serves 2026-07-28, whose calls take the direct hop.
	stateless bool
}

func (u *authUpstream) handler() http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server {
		s := sdk.NewServer(&sdk.Implementation{Name: "authed"}, nil)
		sdk.AddTool(s, &sdk.Tool{Name: "who"}, func(_ context.Context, req *sdk.CallToolRequest, _ echoIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: req.Extra.Header.Get("Authorization")}}}, nil, nil
		})
		return s
	}, &sdk.StreamableHTTPOptions{Stateless: u.stateless})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.auths = append(u.auths, r.Header.Get("Authorization"))
		u.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (u *authUpstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.auths...)
}

// rawKey is where the tests' token infos keep the caller's raw token.
const rawKey = "test.raw"

func callWithToken(t *testing.T, u *proxy, user, raw string) *sdk.CallToolResult {
	t.Helper()
	req := &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: "x_who", Arguments: []byte(`{"text":""}`)},
		Extra: &sdk.RequestExtra{TokenInfo: &sdkauth.TokenInfo{UserID: user, Extra: map[string]any{rawKey: raw}}}}
	res, err := u.callTool("who")(callCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestTokenExchange(t *testing.T) {
	for _, c := range []struct {
		name      string
		stateless bool
	}{{"upstream 2025-11-25", false}, {"upstream 2026-07-28, direct hop", true}} {
		t.Run(c.name, func(t *testing.T) { testTokenExchange(t, c.stateless) })
	}
}

func testTokenExchange(t *testing.T, stateless bool) {
	as := &exchangeAS{exchanges: map[string]int{}}
	asSrv := httptest.NewServer(as)
	defer asSrv.Close()
	up := &authUpstream{stateless: stateless}
	upSrv := httptest.NewServer(up.handler())
	defer upSrv.Close()
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))

	f := newFront(t)
	m, err := New([]Options{{Name: "x", Transport: TransportHTTP, URL: upSrv.URL, Required: true, MaxProcesses: 4,
		OAuth: OAuthOptions{Grant: GrantTokenExchange, TokenURL: asSrv.URL, ClientID: "portcullis", ClientSecretFile: secretFile, Audience: "tickets"}}},
		f.cat, Deps{Backoff: fastBackoff, Logger: logger, SubjectToken: func(ti *sdkauth.TokenInfo, want string) (string, string, bool) {
			s, ok := ti.Extra[rawKey].(string)
			return s, TokenTypeAccessToken, ok && s != ""
		}})
	if err != nil {
		t.Fatal(err)
	}
	u := m.ups[0]
	if u.opts.Isolation != IsolationPerPrincipal {
		t.Fatalf("isolation defaulted to %q", u.opts.Isolation)
	}
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	u.conn.now = clock.Now
	m.Start(context.Background())
	defer within(t, "Manager.Close", func() { m.Close() })
	waitFor(t, "the listing session", func() bool { return m.Ready(context.Background()) == nil })
	if !f.cat.HasTool("x_who") {
		t.Fatal("x_who is not in the catalog")
	}

	alice := text(callWithToken(t, u, "alice", "RAW-alice"))
	bob := text(callWithToken(t, u, "bob", "RAW-bob"))
	if !strings.HasPrefix(alice, "Bearer xchg-alice-") || !strings.HasPrefix(bob, "Bearer xchg-bob-") {
		t.Fatalf("the upstream's tool saw %q for alice and %q for bob; want their exchanged tokens", alice, bob)
	}
	if n := u.pool.size(); n != 2 {
		t.Errorf("%d sessions, want one per caller", n)
	}
	hops := 0
	u.conn.links.m.Range(func(_, v any) bool {
		if v.(*link).hop != nil {
			hops++
		}
		return true
	})
	if want := map[bool]int{false: 0, true: 3}[stateless]; hops != want {
		t.Errorf("%d sessions with a direct hop, want %d (the listing session's and each caller's on 2026-07-28)", hops, want)
	}
	if again := text(callWithToken(t, u, "alice", "RAW-alice")); again != alice || as.count("RAW-alice") != 1 {
		t.Errorf("alice's second call saw %q after %d exchanges; want the cached %q after 1", again, as.count("RAW-alice"), alice)
	}

	// Shortly before expiry the caller's latest token is exchanged again.
	clock.Advance(300*time.Second - 29*time.Second)
	renewed := text(callWithToken(t, u, "alice", "RAW-alice2"))
	if renewed == alice || !strings.HasPrefix(renewed, "Bearer xchg-alice2-") {
		t.Errorf("after expiry alice's call saw %q, want a token exchanged for her new one", renewed)
	}

	// A refused exchange ends the call before anything reaches the
	// upstream, for a new caller and for one with a session.
	before := len(up.requests())
	for _, c := range []struct{ user, raw string }{{"dora", "RAW-denied"}, {"alice", "RAW-denied"}} {
		if c.user == "alice" {
			clock.Advance(time.Hour) // alice's cached token has expired
		}
		res := callWithToken(t, u, c.user, c.raw)
		if !res.IsError || !strings.Contains(text(res), "did not issue a token") || !strings.Contains(text(res), "(invalid_grant)") {
			t.Errorf("%s's refused exchange: %q", c.user, text(res))
		}
		if strings.Contains(text(res), "RAW-") {
			t.Errorf("the error shows the caller's token: %q", text(res))
		}
	}
	if after := len(up.requests()); after != before {
		t.Errorf("%d requests reached the upstream after refused exchanges", after-before)
	}
	if res := callWithToken(t, u, "erin", ""); !res.IsError || !strings.Contains(text(res), "without a token") {
		t.Errorf("a call without a raw token: %q", text(res))
	}

	// The upstream never sees a caller's own token; the listing session
	// uses the client's own.
	var sawCC bool
	for _, a := range up.requests() {
		if strings.Contains(a, "RAW-") || a == "" {
			t.Errorf("the upstream received Authorization %q", a)
		}
		sawCC = sawCC || a == "Bearer cc-token"
	}
	if !sawCC {
		t.Error("the listing session did not use the client-credentials token")
	}
	logMu.Lock()
	defer logMu.Unlock()
	if l := logs.String(); strings.Contains(l, "RAW-") || strings.Contains(l, "xchg-") || strings.Contains(l, "s3cret") || strings.Contains(l, "cc-token") {
		t.Errorf("a token or secret was logged:\n%s", l)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
