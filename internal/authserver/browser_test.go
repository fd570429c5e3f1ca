package authserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// pages is a server of Portcullis's own pages on the authorization
// server's host (cookies ignore the port): /start signs the browser in and
// returns to the path in ?return=, /whoami answers with the browser's user.
func (ts *testServer) pages(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /start", func(w http.ResponseWriter, r *http.Request) {
		ts.SignInBrowser(w, r, r.URL.Query().Get("return"))
	})
	mux.HandleFunc("GET /whoami", func(w http.ResponseWriter, r *http.Request) {
		if sub, ok := ts.BrowserUser(r); ok {
			w.Write([]byte(sub))
			return
		}
		http.Error(w, "not signed in", http.StatusUnauthorized)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// browserSignIn walks b through a browser sign-in that returns to
// /connections, and returns the callback's response.
func (ts *testServer) browserSignIn(t *testing.T, b *browser, pages string) *http.Response {
	t.Helper()
	resp, body := b.get(pages + "/start?return=/connections")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("start: %d %s", resp.StatusCode, body)
	}
	resp, _ = b.get(resp.Header.Get("Location")) // the IdP
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("idp: %d", resp.StatusCode)
	}
	resp, _ = b.get(resp.Header.Get("Location")) // callback
	return resp
}

func TestBrowserSignIn(t *testing.T) {
	now := time.Now()
	ts := startServerDeps(t, func(d *Deps) { d.Now = func() time.Time { return now } })
	pages := ts.pages(t)
	b := newBrowser(t)
	if resp, _ := b.get(pages.URL + "/whoami"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("before signing in: %d, want 401", resp.StatusCode)
	}
	resp := ts.browserSignIn(t, b, pages.URL)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/connections" {
		t.Fatalf("callback: %d to %q, want 303 to /connections", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, body := b.get(pages.URL + "/whoami"); resp.StatusCode != http.StatusOK || body != "alice" {
		t.Fatalf("signed in: %d %q, want alice", resp.StatusCode, body)
	}
	if resp, _ := newBrowser(t).get(pages.URL + "/whoami"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("another browser: %d, want 401", resp.StatusCode)
	}
	now = now.Add(BrowserSessionTTL)
	if resp, _ := b.get(pages.URL + "/whoami"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after the session's hour: %d, want 401", resp.StatusCode)
	}
}

func TestBrowserSessionCookieForged(t *testing.T) {
	ts := startServer(t)
	pages := ts.pages(t)
	b := newBrowser(t)
	ts.browserSignIn(t, b, pages.URL)
	u, _ := http.NewRequest(http.MethodGet, pages.URL, nil)
	var real string
	for _, c := range b.c.Jar.Cookies(u.URL) {
		if c.Name == ts.sessionCookieName() {
			real = c.Value
		}
	}
	if real == "" {
		t.Fatal("no session cookie")
	}
	other := startServer(t) // another server's keys
	for name, v := range map[string]string{
		"tampered":         real[:len(real)-2] + "AA",
		"truncated":        real[:10],
		"not base64":       "%%%",
		"another server's": "", // filled below
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if name == "another server's" {
			r.AddCookie(&http.Cookie{Name: other.sessionCookieName(), Value: real})
			if _, ok := other.BrowserUser(r); ok {
				t.Errorf("%s cookie accepted", name)
			}
			continue
		}
		r.AddCookie(&http.Cookie{Name: ts.sessionCookieName(), Value: v})
		if sub, ok := ts.BrowserUser(r); ok {
			t.Errorf("%s cookie accepted as %q", name, sub)
		}
	}
}

func TestBrowserSignInReturnsOnlyHere(t *testing.T) {
	ts := startServer(t)
	pages := ts.pages(t)
	for _, ret := range []string{"https://evil.example/", "//evil.example/x", "/\\evil.example", "connections", "", "/a\r\nSet-Cookie: x=1"} {
		resp, _ := newBrowser(t).get(pages.URL + "/start?return=" + strings.ReplaceAll(ret, "\r\n", "%0d%0a"))
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("return %q: %d, want 400", ret, resp.StatusCode)
		}
	}
}

// TestBrowserSignInRefusedIsAPage: a sign-in the provider refuses ends on
// a page, not at a client.
func TestBrowserSignInRefusedIsAPage(t *testing.T) {
	ts := startServer(t)
	ts.idp.refuse = "access_denied"
	pages := ts.pages(t)
	b := newBrowser(t)
	resp := ts.browserSignIn(t, b, pages.URL)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Location") != "" {
		t.Fatalf("refused sign-in: %d to %q, want a 403 page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := b.get(pages.URL + "/whoami"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after a refused sign-in: %d, want 401", resp.StatusCode)
	}
}

// TestSignInChainsConnections: after the identity provider, the sign-in
// goes through each account the server needs that the user lacks, once,
// with the browser signed in for the connect pages, then on to consent.
func TestSignInChainsConnections(t *testing.T) {
	type ask struct {
		subject, resource string
		attempted         []string
	}
	var asks []ask
	ts := startServerDeps(t, func(d *Deps) {
		d.NextConnection = func(_ context.Context, subject, resource string, attempted []string, returnTo string) (string, string, error) {
			asks = append(asks, ask{subject, resource, slices.Clone(attempted)})
			for _, name := range []string{"github", "jira"} {
				if !slices.Contains(attempted, name) {
					return name, "/connect/" + name + "?return=" + url.QueryEscape(returnTo), nil
				}
			}
			return "", "", nil
		}
	})
	pages := ts.pages(t)
	b := newBrowser(t)
	authURL, _ := ts.authorizeURL(nil)
	resp, _ := b.get(authURL)
	resp, _ = b.get(resp.Header.Get("Location")) // the IdP
	resp, _ = b.get(resp.Header.Get("Location")) // callback
	var connected []string
	for resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/connect/") {
		loc, _ := url.Parse(resp.Header.Get("Location"))
		connected = append(connected, strings.TrimPrefix(loc.Path, "/connect/"))
		// The connect page knows the user.
		if r, body := b.get(pages.URL + "/whoami"); r.StatusCode != http.StatusOK || body != "alice" {
			t.Fatalf("at the connect page the browser is %d %q, want alice", r.StatusCode, body)
		}
		ret := loc.Query().Get("return")
		if !strings.HasPrefix(ret, PathContinue+"?login=") {
			t.Fatalf("the connection returns to %q", ret)
		}
		if r, _ := newBrowser(t).get(ts.srv.URL + ret); r.StatusCode != http.StatusBadRequest {
			t.Fatalf("another browser continued the sign-in: %d", r.StatusCode)
		}
		resp, _ = b.get(ts.srv.URL + ret)
	}
	if !slices.Equal(connected, []string{"github", "jira"}) {
		t.Fatalf("chained %v, want github then jira", connected)
	}
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), PathConsent) {
		t.Fatalf("after the connections: %d to %q, want the consent page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if len(asks) != 3 || asks[0].subject != "alice" || asks[0].resource != ts.srv.URL+"/mcp" || !slices.Equal(asks[2].attempted, []string{"github", "jira"}) {
		t.Fatalf("asked %+v", asks)
	}
}
