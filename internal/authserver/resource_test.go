package authserver

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// Paths of the servers of startServers: the root server and two virtual
// servers.
const (
	pathRoot  = "/mcp"
	pathTeamA = "/mcp/team-a"
	pathTeamB = "/mcp/team-b"
)

// withServers adds two virtual servers to the resources of a test
// server: team-a, whose title holds what the consent page must escape,
// and team-b, without a title (the page shows its name).
func withServers(d *Deps) {
	base := strings.TrimSuffix(d.Resources[0].URL, pathRoot)
	d.Resources = append(d.Resources,
		Resource{URL: base + pathTeamA, Name: "team-a", Title: `Team <A> & "friends"`},
		Resource{URL: base + pathTeamB, Name: "team-b"})
}

// startServers starts a test server issuing tokens for the root server
// and the two virtual servers of withServers.
func startServers(t *testing.T, edit ...func(*Options)) *testServer {
	t.Helper()
	return startServerDeps(t, withServers, edit...)
}

// signInTo signs in to the server at path with a new browser, approving
// the consent page if one is shown, and returns the code, its verifier
// and the page ("" when the consent was remembered).
func (ts *testServer) signInTo(t *testing.T, path string) (code, verifier, page string) {
	t.Helper()
	b := newBrowser(t)
	authURL, verifier := ts.authorizeURL(url.Values{"resource": {ts.srv.URL + path}})
	resp, body := ts.signIn(b, authURL)
	if resp.StatusCode == http.StatusOK {
		page = body
		resp, _ = ts.approve(b, page, "approve")
	}
	return ts.codeFrom(t, resp), verifier, page
}

// exchangeWith redeems code with resource as the resource parameters
// (none when nil).
func (ts *testServer) exchangeWith(t *testing.T, code, verifier string, resource []string) (int, map[string]any) {
	t.Helper()
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier}, "client_id": {"app"}, "redirect_uri": {testRedirect}}
	if resource != nil {
		form["resource"] = resource
	}
	return ts.token(t, form)
}

// refreshWith uses rt with resource as the resource parameters (none
// when nil).
func (ts *testServer) refreshWith(t *testing.T, rt string, resource []string) (int, map[string]any) {
	t.Helper()
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {"app"}}
	if resource != nil {
		form["resource"] = resource
	}
	return ts.token(t, form)
}

// audience is the aud claim of a token response's access token.
func audience(t *testing.T, tok map[string]any) []string {
	t.Helper()
	at, _ := tok["access_token"].(string)
	_, claims := decodeJWT(t, at)
	var out []string
	switch aud := claims["aud"].(type) {
	case string:
		out = []string{aud}
	case []any:
		for _, a := range aud {
			s, _ := a.(string)
			out = append(out, s)
		}
	}
	return out
}

// TestEachResourceSignsIn: a sign-in to each server, the root or a
// virtual one, shows a consent page naming that server (its title, else
// its name, escaped, and its URL) and yields tokens whose audience is its
// resource alone, a refresh's too.
func TestEachResourceSignsIn(t *testing.T) {
	for _, tt := range []struct {
		name, path string
		// names is how the consent page names the server, before its URL.
		names string
	}{
		{name: "root server", path: pathRoot, names: `<span class="server">Portcullis</span>`},
		{name: "virtual server with a title", path: pathTeamA, names: `<span class="server">Team &lt;A&gt; &amp; &#34;friends&#34;</span>`},
		{name: "virtual server without a title", path: pathTeamB, names: `<span class="server">team-b</span>`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServers(t)
			resource := ts.srv.URL + tt.path
			code, verifier, page := ts.signInTo(t, tt.path)
			if want := tt.names + " (" + resource + ")"; !strings.Contains(page, want) {
				t.Errorf("consent page does not name the server as %s:\n%s", want, page)
			}
			if strings.Contains(page, "<A>") {
				t.Errorf("consent page shows the title unescaped:\n%s", page)
			}
			status, tok := ts.exchangeWith(t, code, verifier, []string{resource})
			if status != http.StatusOK {
				t.Fatalf("token: %d %v", status, tok)
			}
			if aud := audience(t, tok); !slices.Equal(aud, []string{resource}) {
				t.Errorf("access token aud %v, want [%s]", aud, resource)
			}
			status, tok = ts.refreshWith(t, tok["refresh_token"].(string), nil)
			if status != http.StatusOK {
				t.Fatalf("refresh: %d %v", status, tok)
			}
			if aud := audience(t, tok); !slices.Equal(aud, []string{resource}) {
				t.Errorf("refreshed access token aud %v, want [%s]", aud, resource)
			}
		})
	}
}

// TestUnknownResourceRefused: an authorization request whose resource
// is not exactly one of the servers' goes back to the client with
// invalid_target, whose description lists the resources accepted.
func TestUnknownResourceRefused(t *testing.T) {
	ts := startServers(t)
	a, b := ts.srv.URL+pathTeamA, ts.srv.URL+pathTeamB
	for _, tt := range []struct {
		name     string
		resource []string // nil: none
	}{
		{name: "none", resource: nil},
		{name: "another host", resource: []string{"https://other.example" + pathTeamA}},
		{name: "a path no server has", resource: []string{ts.srv.URL + "/mcp/team-c"}},
		{name: "trailing slash", resource: []string{a + "/"}},
		{name: "other case", resource: []string{ts.srv.URL + "/mcp/TEAM-A"}},
		{name: "a prefix of a server's", resource: []string{ts.srv.URL + "/mcp/team"}},
		{name: "with a query", resource: []string{a + "?x=1"}},
		{name: "two servers", resource: []string{a, b}},
		{name: "one server twice", resource: []string{a, a}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			authURL, _ := ts.authorizeURL(url.Values{"resource": tt.resource})
			resp, body := newBrowser(t).get(authURL)
			loc, err := url.Parse(resp.Header.Get("Location"))
			if err != nil || !strings.HasPrefix(loc.String(), testRedirect+"?") {
				t.Fatalf("%d Location %q, want back to the client; body %s", resp.StatusCode, resp.Header.Get("Location"), body)
			}
			if got := loc.Query().Get("error"); got != "invalid_target" {
				t.Errorf("error %q, want invalid_target", got)
			}
			desc := loc.Query().Get("error_description")
			for _, p := range []string{pathRoot, pathTeamA, pathTeamB} {
				if !strings.Contains(desc, ts.srv.URL+p+",") && !strings.Contains(desc, ts.srv.URL+p+";") {
					t.Errorf("error_description %q does not list %s", desc, ts.srv.URL+p)
				}
			}
		})
	}
	if !ts.events.has(Event{Endpoint: "authorize", Outcome: "refused", Reason: "invalid_target"}) {
		t.Error("no refused authorize event with reason invalid_target")
	}
}

// TestGrantKeepsItsResource: a code and a refresh token of a sign-in to
// team-a are redeemed for team-a only: a resource parameter naming
// another server, or none of this server's, is invalid_target, and
// leaves the refresh token valid for team-a.
func TestGrantKeepsItsResource(t *testing.T) {
	ts := startServers(t)
	a := ts.srv.URL + pathTeamA
	for _, tt := range []struct {
		name     string
		resource []string // the token requests' resource parameters; nil: none
		refused  bool
	}{
		{name: "none", resource: nil},
		{name: "its own", resource: []string{a}},
		{name: "another virtual server's", resource: []string{ts.srv.URL + pathTeamB}, refused: true},
		{name: "the root server's", resource: []string{ts.srv.URL + pathRoot}, refused: true},
		{name: "unknown", resource: []string{"https://other.example/mcp"}, refused: true},
		{name: "its own and another", resource: []string{a, ts.srv.URL + pathTeamB}, refused: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			check := func(what string, status int, tok map[string]any) {
				t.Helper()
				if tt.refused {
					if status != http.StatusBadRequest || tok["error"] != "invalid_target" || tok["access_token"] != nil {
						t.Fatalf("%s: %d %v, want 400 invalid_target", what, status, tok)
					}
					return
				}
				if status != http.StatusOK {
					t.Fatalf("%s: %d %v", what, status, tok)
				}
				if aud := audience(t, tok); !slices.Equal(aud, []string{a}) {
					t.Errorf("%s: aud %v, want [%s]", what, aud, a)
				}
			}
			code, verifier, _ := ts.signInTo(t, pathTeamA)
			status, tok := ts.exchangeWith(t, code, verifier, tt.resource)
			check("code exchange", status, tok)
			if tt.refused {
				code, verifier, _ := ts.signInTo(t, pathTeamA)
				if status, tok = ts.exchangeWith(t, code, verifier, []string{a}); status != http.StatusOK {
					t.Fatalf("code exchange for its own resource: %d %v", status, tok)
				}
			}
			rt := tok["refresh_token"].(string)
			status, tok = ts.refreshWith(t, rt, tt.resource)
			check("refresh", status, tok)
			if tt.refused {
				status, tok = ts.refreshWith(t, rt, []string{a})
				if status != http.StatusOK {
					t.Fatalf("the refresh token after a refusal, for its own resource: %d %v, want it still valid", status, tok)
				}
				if aud := audience(t, tok); !slices.Equal(aud, []string{a}) {
					t.Errorf("refresh: aud %v, want [%s]", aud, a)
				}
			}
		})
	}
}

// TestConsentPerResource: a consent remembered for one server does not
// count for another, and revoking a grant for one server forgets only
// that server's consent.
func TestConsentPerResource(t *testing.T) {
	ts := startServers(t)
	asked := func(path string) bool {
		t.Helper()
		_, _, page := ts.signInTo(t, path)
		return page != ""
	}
	if !asked(pathTeamA) {
		t.Fatal("first sign-in to team-a: no consent page")
	}
	for _, tt := range []struct {
		name, path string
		asked      bool
	}{
		{name: "the same server again", path: pathTeamA, asked: false},
		{name: "another virtual server", path: pathTeamB, asked: true},
		{name: "another virtual server, approved", path: pathTeamB, asked: false},
		{name: "the root server", path: pathRoot, asked: true},
	} {
		if got := asked(tt.path); got != tt.asked {
			t.Errorf("%s (%s): consent page shown %v, want %v", tt.name, tt.path, got, tt.asked)
		}
	}
	// Revoking a team-a grant withdraws the consent to team-a only.
	code, verifier, _ := ts.signInTo(t, pathTeamA)
	status, tok := ts.exchangeWith(t, code, verifier, nil)
	if status != http.StatusOK {
		t.Fatalf("token: %d %v", status, tok)
	}
	resp, err := http.PostForm(ts.srv.URL+PathRevoke, url.Values{"token": {tok["refresh_token"].(string)}, "token_type_hint": {"refresh_token"}, "client_id": {"app"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !asked(pathTeamA) {
		t.Error("team-a after its grant was revoked: no consent page, want it asked again")
	}
	if asked(pathTeamB) {
		t.Error("team-b after a team-a grant was revoked: consent page shown, want its consent kept")
	}
}

// TestIDJAGResources: an ID-JAG's token is for the resource the
// assertion names, else the one the request names, else the root
// server's; the request may not name another than the assertion's.
func TestIDJAGResources(t *testing.T) {
	ts, e, _ := startIDJAGDeps(t, withServers)
	root, a, b := ts.srv.URL+pathRoot, ts.srv.URL+pathTeamA, ts.srv.URL+pathTeamB
	for _, tt := range []struct {
		name     string
		asserted any        // the assertion's resource claim; nil: none
		form     url.Values // the request's parameters
		want     string     // the token's audience; "" refused with error
		error    string
	}{
		{name: "asserted virtual server", asserted: a, want: a},
		{name: "asserted as a list of one", asserted: []string{b}, want: b},
		{name: "asserted and requested alike", asserted: a, form: url.Values{"resource": {a}}, want: a},
		{name: "none asserted, requested", form: url.Values{"resource": {b}}, want: b},
		{name: "none asserted, audience requested", form: url.Values{"audience": {a}}, want: a},
		{name: "none at all: the root server", want: root},
		{name: "requested another than asserted", asserted: a, form: url.Values{"resource": {b}}, error: "invalid_target"},
		{name: "audience another than asserted", asserted: a, form: url.Values{"audience": {root}}, error: "invalid_target"},
		{name: "requested two", form: url.Values{"resource": {a, b}}, error: "invalid_target"},
		{name: "requested unknown", form: url.Values{"resource": {"https://other.example/mcp"}}, error: "invalid_target"},
		{name: "asserted unknown", asserted: ts.srv.URL + "/mcp/team-c", error: "invalid_grant"},
		{name: "asserted two", asserted: []string{a, b}, error: "invalid_grant"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, tok := ts.present(t, e.assertion(e.claims(ts, map[string]any{"resource": tt.asserted})), tt.form)
			if tt.want == "" {
				if status != http.StatusBadRequest || tok["error"] != tt.error {
					t.Fatalf("%d %v, want 400 %s", status, tok, tt.error)
				}
				return
			}
			if status != http.StatusOK {
				t.Fatalf("%d %v", status, tok)
			}
			if aud := audience(t, tok); !slices.Equal(aud, []string{tt.want}) || tok["resource"] != tt.want {
				t.Errorf("aud %v, resource %v; want [%s] and %s", aud, tok["resource"], tt.want, tt.want)
			}
		})
	}
}

// withServerScopes is withServers with scopes of each server's own: the
// root server's admin:root, team-a's team:a, team-b's team:b, besides
// the scopes every server offers (mcp:tools, mcp:admin).
func withServerScopes(d *Deps) {
	withServers(d)
	d.Resources[0].Scopes = []string{"admin:root"}
	d.Resources[1].Scopes = []string{"team:a"}
	d.Resources[2].Scopes = []string{"team:b"}
}

// TestScopesPerResource: a sign-in for one server (its RFC 8707
// resource) is offered and granted that server's scopes and those every
// server offers, never another server's: a request for one of those is
// refused with invalid_scope, at the authorization endpoint and for an
// ID-JAG. The authorization server's metadata (RFC 8414, one document for
// every resource) lists them all.
func TestScopesPerResource(t *testing.T) {
	ts := startServerDeps(t, withServerScopes)
	t.Run("metadata lists every server's scopes", func(t *testing.T) {
		var md map[string]any
		resp, body := newBrowser(t).get(ts.srv.URL + PathMetadata)
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &md) != nil {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		var got []string
		for _, s := range md["scopes_supported"].([]any) {
			got = append(got, s.(string))
		}
		slices.Sort(got)
		if want := []string{"admin:root", "mcp:admin", "mcp:tools", "offline_access", "team:a", "team:b"}; !slices.Equal(got, want) {
			t.Errorf("scopes_supported %v, want %v", got, want)
		}
	})
	for _, tt := range []struct {
		name, path, scope string
		refused           bool // with invalid_scope, back to the client
	}{
		{name: "a virtual server's own and the common ones", path: pathTeamA, scope: "mcp:tools team:a"},
		{name: "the root server's own", path: pathRoot, scope: "admin:root mcp:tools"},
		{name: "another server's", path: pathTeamA, scope: "team:a team:b", refused: true},
		{name: "the root server's at a virtual server", path: pathTeamB, scope: "admin:root", refused: true},
		{name: "a virtual server's at the root server", path: pathRoot, scope: "team:a", refused: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resource := ts.srv.URL + tt.path
			b := newBrowser(t)
			authURL, verifier := ts.authorizeURL(url.Values{"resource": {resource}, "scope": {tt.scope}})
			if tt.refused {
				resp, body := b.get(authURL)
				u, err := url.Parse(resp.Header.Get("Location"))
				if err != nil || !strings.HasPrefix(u.String(), testRedirect+"?") || u.Query().Get("error") != "invalid_scope" {
					t.Fatalf("%d Location %q: want back to the client with invalid_scope; body %s", resp.StatusCode, resp.Header.Get("Location"), body)
				}
				if !ts.events.has(Event{Endpoint: "authorize", Outcome: "refused", Reason: "invalid_scope"}) {
					t.Errorf("no refused event for the scope; events %+v", ts.events.ev)
				}
				return
			}
			resp, page := ts.signIn(b, authURL)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("no consent page: %d", resp.StatusCode)
			}
			for _, sc := range strings.Fields(tt.scope) {
				if !strings.Contains(page, sc) {
					t.Errorf("the consent page does not list %s:\n%s", sc, page)
				}
			}
			resp, _ = ts.approve(b, page, "approve")
			status, tok := ts.exchangeWith(t, ts.codeFrom(t, resp), verifier, []string{resource})
			if status != http.StatusOK || tok["scope"] != tt.scope {
				t.Fatalf("token: %d %v, want the scope %q", status, tok, tt.scope)
			}
		})
	}
}

// TestIDJAGScopesPerResource: an ID-JAG's token gets the scopes of the
// server it is for and the common ones; an assertion or a request that
// names another server's is refused.
func TestIDJAGScopesPerResource(t *testing.T) {
	ts, e, _ := startIDJAGDeps(t, withServerScopes)
	a := ts.srv.URL + pathTeamA
	for _, tt := range []struct {
		name     string
		asserted string     // the assertion's scope claim
		form     url.Values // the request's parameters
		want     string     // the token's scope; "" refused with error
		error    string
	}{
		{name: "the server's own and common scopes", asserted: "mcp:tools team:a", want: "mcp:tools team:a"},
		{name: "requested of those asserted", asserted: "mcp:tools team:a", form: url.Values{"scope": {"team:a"}}, want: "team:a"},
		{name: "asserted another server's", asserted: "team:a team:b", error: "invalid_grant"},
		{name: "asserted the root server's", asserted: "admin:root", error: "invalid_grant"},
		{name: "requested another server's", asserted: "team:a team:b", form: url.Values{"scope": {"team:b"}}, error: "invalid_scope"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, tok := ts.present(t, e.assertion(e.claims(ts, map[string]any{"resource": a, "scope": tt.asserted})), tt.form)
			if tt.want == "" {
				if status != http.StatusBadRequest || tok["error"] != tt.error {
					t.Fatalf("%d %v, want 400 %s", status, tok, tt.error)
				}
				return
			}
			if status != http.StatusOK || tok["scope"] != tt.want {
				t.Fatalf("%d %v, want a token for %q", status, tok, tt.want)
			}
		})
	}
}
