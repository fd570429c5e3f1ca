package tokenexchange

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// checkForm fails t unless form is exactly want.
func checkForm(t *testing.T, got, want url.Values) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("form has %d fields, want %d: %v", len(got), len(want), got.Encode())
	}
	for k, v := range want {
		if got.Get(k) != v[0] || len(got[k]) != 1 {
			t.Errorf("form %s = %q, want %q", k, got[k], v)
		}
	}
}

func TestJWTBearerOnBehalfOfForm(t *testing.T) {
	e := newEndpoint(t)
	e.reply = func(w http.ResponseWriter) {
		// A plain token response: no issued_token_type.
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"obo-1","token_type":"Bearer","expires_in":600}`)
	}
	c := &Config{GrantType: GrantTypeJWTBearer, TokenURL: e.srv.URL, ClientID: "portcullis", ClientSecret: secret,
		Scopes: []string{"api://tickets/.default"}, Params: url.Values{"requested_token_use": {"on_behalf_of"}, "grant_type": {"ignored"}},
		HTTPClient: e.srv.Client()}
	now := time.Unix(1_000_000, 0)
	tok, err := c.Exchange(bounded(t), Subject{Token: subject, Type: TokenTypeIDToken}, now)
	if err != nil {
		t.Fatal(err)
	}
	if tok.AccessToken != "obo-1" || !tok.Expiry.Equal(now.Add(600*time.Second)) {
		t.Errorf("token = %+v", tok)
	}
	checkForm(t, e.forms[0], url.Values{
		"grant_type":          {GrantTypeJWTBearer},
		"assertion":           {subject},
		"requested_token_use": {"on_behalf_of"},
		"scope":               {"api://tickets/.default"},
	})
	if e.auths[0] != "portcullis:"+secret {
		t.Errorf("basic auth = %q", e.auths[0])
	}
}

// idjagEndpoints are the identity provider, issuing an ID-JAG for the
// subject token, and the upstream's authorization server, issuing an
// access token for it.
func idjagEndpoints(t *testing.T) (idp, as *endpoint, c *Config) {
	idp, as = newEndpoint(t), newEndpoint(t)
	idp.reply = func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"IDJAG-JWT","issued_token_type":"urn:ietf:params:oauth:token-type:id-jag","token_type":"N_A","expires_in":300}`)
	}
	as.reply = func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"upstream-at","token_type":"Bearer","expires_in":900}`)
	}
	c = &Config{TokenURL: idp.srv.URL, ClientID: "portcullis-at-idp", ClientSecret: "IDP-SECRET", Server: "the identity provider",
		RequestedTokenType: TokenTypeIDJAG, Audience: "https://as.example", Resource: "https://up.example/mcp", Scopes: []string{"tickets:read"},
		HTTPClient: idp.srv.Client(),
		Next: &Config{GrantType: GrantTypeJWTBearer, TokenURL: as.srv.URL, ClientID: "portcullis-at-as", ClientSecret: secret,
			Server: "the upstream's authorization server", HTTPClient: as.srv.Client()}}
	return idp, as, c
}

func TestIDJAGChain(t *testing.T) {
	idp, as, c := idjagEndpoints(t)
	now := time.Unix(1_000_000, 0)
	tok, err := c.Exchange(bounded(t), Subject{Token: subject, Type: TokenTypeIDToken}, now)
	if err != nil {
		t.Fatal(err)
	}
	if tok.AccessToken != "upstream-at" || !tok.Expiry.Equal(now.Add(900*time.Second)) {
		t.Errorf("token = %+v, want the upstream's authorization server's", tok)
	}
	checkForm(t, idp.forms[0], url.Values{
		"grant_type":           {GrantType},
		"subject_token":        {subject},
		"subject_token_type":   {TokenTypeIDToken},
		"requested_token_type": {TokenTypeIDJAG},
		"audience":             {"https://as.example"},
		"resource":             {"https://up.example/mcp"},
		"scope":                {"tickets:read"},
	})
	checkForm(t, as.forms[0], url.Values{
		"grant_type": {GrantTypeJWTBearer},
		"assertion":  {"IDJAG-JWT"},
	})
	if idp.auths[0] != "portcullis-at-idp:IDP-SECRET" || as.auths[0] != "portcullis-at-as:"+secret {
		t.Errorf("basic auth = %q at the identity provider, %q at the authorization server", idp.auths[0], as.auths[0])
	}
}

func TestIDJAGChainErrors(t *testing.T) {
	tests := []struct {
		name      string
		idp, as   func(w http.ResponseWriter)
		want      string
		asReached bool
	}{
		{name: "identity provider refuses, echoing the subject token",
			idp: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(400)
				_, _ = io.WriteString(w, `{"error":"invalid_grant","error_description":"bad `+subject+` for IDP-SECRET"}`)
			},
			want: "token exchange failed at the identity provider: HTTP 400: invalid_grant"},
		{name: "identity provider issues another type",
			idp: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"access_token":"IDJAG-JWT","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer"}`)
			},
			want: "is not the urn:ietf:params:oauth:token-type:id-jag requested"},
		{name: "authorization server refuses, echoing the ID-JAG",
			as: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(400)
				_, _ = io.WriteString(w, `{"error":"invalid_grant","error_description":"replayed IDJAG-JWT"}`)
			},
			want: "jwt-bearer grant failed at the upstream's authorization server: HTTP 400: invalid_grant", asReached: true},
		{name: "authorization server issues no bearer token",
			as: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"access_token":"x","token_type":"DPoP"}`)
			},
			want: "not Bearer", asReached: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idp, as, c := idjagEndpoints(t)
			if tt.idp != nil {
				idp.reply = tt.idp
			}
			if tt.as != nil {
				as.reply = tt.as
			}
			_, err := c.Exchange(bounded(t), Subject{Token: subject, Type: TokenTypeIDToken}, time.Now())
			var xe *Error
			if !errors.As(err, &xe) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want *Error with %q", err, tt.want)
			}
			for _, s := range []string{subject, secret, "IDP-SECRET", "IDJAG-JWT"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error shows %s: %v", s, err)
				}
			}
			if got := as.n.Load() > 0; got != tt.asReached {
				t.Errorf("the authorization server was asked: %v, want %v", got, tt.asReached)
			}
		})
	}
}

// TestSourceCachesChainPerSubject checks that a Source runs the whole
// chain once per token lifetime.
func TestSourceCachesChain(t *testing.T) {
	idp, as, c := idjagEndpoints(t)
	now := time.Unix(1_000_000, 0)
	s := NewSource(c, func() time.Time { return now })
	s.SetSubject(Subject{Token: subject, Type: TokenTypeIDToken})
	for range 3 {
		if tok, err := s.Token(bounded(t)); err != nil || tok.AccessToken != "upstream-at" {
			t.Fatalf("Token = %+v, %v", tok, err)
		}
	}
	if idp.n.Load() != 1 || as.n.Load() != 1 {
		t.Errorf("%d requests at the identity provider, %d at the authorization server; want 1 each", idp.n.Load(), as.n.Load())
	}
	now = now.Add(900*time.Second - EarlyExpiry + time.Second)
	if _, err := s.Token(bounded(t)); err != nil {
		t.Fatal(err)
	}
	if idp.n.Load() != 2 || as.n.Load() != 2 {
		t.Errorf("after expiry: %d and %d requests; want a new ID-JAG and token", idp.n.Load(), as.n.Load())
	}
}
