package tokenexchange

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	subject = "caller-token-SUBJ"
	secret  = "client-secret-SEC"
)

// endpoint is a fake token endpoint that records the requests' forms.
type endpoint struct {
	srv   *httptest.Server
	mu    sync.Mutex
	forms []url.Values
	auths []string
	n     atomic.Int32
	// reply writes the response; nil issues "exchanged-<n>" for 300s.
	reply func(w http.ResponseWriter)
}

func newEndpoint(t *testing.T) *endpoint {
	e := &endpoint{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := e.n.Add(1)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
			http.Error(w, "bad request", 400)
			return
		}
		_ = r.ParseForm()
		id, sec, _ := r.BasicAuth()
		e.mu.Lock()
		e.forms = append(e.forms, r.PostForm)
		e.auths = append(e.auths, id+":"+sec)
		reply := e.reply
		e.mu.Unlock()
		if reply != nil {
			reply(w)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = io.WriteString(w, `{"access_token":"exchanged-`+string(rune('0'+n))+`","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer","expires_in":300}`)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *endpoint) config() *Config {
	return &Config{TokenURL: e.srv.URL, ClientID: "portcullis gw", ClientSecret: secret, Audience: "https://tickets.example", Resource: "https://tickets.example/mcp", Scopes: []string{"tickets:read", "tickets:write"}, HTTPClient: e.srv.Client()}
}

func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestExchangeForm(t *testing.T) {
	e := newEndpoint(t)
	now := time.Unix(1_000_000, 0)
	tok, err := e.config().Exchange(bounded(t), Subject{Token: subject}, now)
	if err != nil {
		t.Fatal(err)
	}
	if tok.AccessToken != "exchanged-1" || !tok.Expiry.Equal(now.Add(300*time.Second)) {
		t.Errorf("token = %+v", tok)
	}
	want := url.Values{
		"grant_type":           {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token":        {subject},
		"subject_token_type":   {"urn:ietf:params:oauth:token-type:access_token"},
		"requested_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
		"audience":             {"https://tickets.example"},
		"resource":             {"https://tickets.example/mcp"},
		"scope":                {"tickets:read tickets:write"},
	}
	got := e.forms[0]
	if len(got) != len(want) {
		t.Errorf("form has %d fields, want %d: %v", len(got), len(want), got.Encode())
	}
	for k, v := range want {
		if got.Get(k) != v[0] || len(got[k]) != 1 {
			t.Errorf("form %s = %q, want %q", k, got[k], v)
		}
	}
	// RFC 6749 2.3.1: id and secret are form-encoded before Basic.
	if e.auths[0] != "portcullis+gw:"+secret {
		t.Errorf("basic auth = %q", e.auths[0])
	}
	if got.Has("client_secret") || got.Has("client_id") {
		t.Error("client credentials sent in the form too")
	}
}

func TestExchangeOptionalFieldsOmitted(t *testing.T) {
	e := newEndpoint(t)
	c := &Config{TokenURL: e.srv.URL, ClientID: "c", ClientSecret: secret, RequestedTokenType: TokenTypeJWT, HTTPClient: e.srv.Client()}
	if _, err := c.Exchange(bounded(t), Subject{Token: subject}, time.Now()); err != nil {
		t.Fatal(err)
	}
	f := e.forms[0]
	for _, k := range []string{"audience", "resource", "scope"} {
		if f.Has(k) {
			t.Errorf("form has %s", k)
		}
	}
	if f.Get("requested_token_type") != TokenTypeJWT {
		t.Errorf("requested_token_type = %q", f.Get("requested_token_type"))
	}
}

func TestExchangeErrors(t *testing.T) {
	tests := []struct {
		name  string
		reply func(w http.ResponseWriter)
		want  string
	}{
		{"oauth error echoing secrets", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"error":"invalid_target","error_description":"no audience for `+subject+` with `+secret+`"}`)
		}, "HTTP 400: invalid_target"},
		{"not json", func(w http.ResponseWriter) { _, _ = io.WriteString(w, "<html>"+subject) }, "not JSON"},
		{"no token", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"token_type":"Bearer","issued_token_type":"x"}`)
		}, "no access_token"},
		{"not bearer", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"access_token":"a","token_type":"N_A","issued_token_type":"urn:ietf:params:oauth:token-type:id_token"}`)
		}, "not Bearer"},
		{"no issued type", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"access_token":"a","token_type":"Bearer"}`)
		}, "no issued_token_type"},
		{"bad expiry", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"access_token":"a","token_type":"Bearer","issued_token_type":"x","expires_in":-5}`)
		}, "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEndpoint(t)
			e.reply = tt.reply
			_, err := e.config().Exchange(bounded(t), Subject{Token: subject}, time.Now())
			var xe *Error
			if !errors.As(err, &xe) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want *Error with %q", err, tt.want)
			}
			if strings.Contains(err.Error(), subject) || strings.Contains(err.Error(), secret) {
				t.Errorf("error shows a secret: %v", err)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		e := newEndpoint(t)
		c := e.config()
		e.srv.Close()
		_, err := c.Exchange(bounded(t), Subject{Token: subject}, time.Now())
		if err == nil || strings.Contains(err.Error(), subject) || strings.Contains(err.Error(), secret) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestSourceCachesUntilShortlyBeforeExpiry(t *testing.T) {
	e := newEndpoint(t)
	now := time.Unix(1_000_000, 0)
	s := NewSource(e.config(), func() time.Time { return now })
	s.SetSubject(Subject{Token: subject})
	get := func() string {
		t.Helper()
		tok, err := s.Token(bounded(t))
		if err != nil {
			t.Fatal(err)
		}
		return tok.AccessToken
	}
	if a, b := get(), get(); a != "exchanged-1" || b != a {
		t.Fatalf("tokens %q, %q; want one exchange", a, b)
	}
	now = now.Add(300*time.Second - EarlyExpiry - time.Second)
	if got := get(); got != "exchanged-1" {
		t.Fatalf("before the early expiry: %q", got)
	}
	s.SetSubject(Subject{Token: "caller-token-NEWER"})
	now = now.Add(2 * time.Second)
	if got := get(); got != "exchanged-2" {
		t.Fatalf("after the early expiry: %q", got)
	}
	if f := e.forms[1].Get("subject_token"); f != "caller-token-NEWER" {
		t.Errorf("second exchange used subject %q", f)
	}
	if n := e.n.Load(); n != 2 {
		t.Errorf("%d exchanges, want 2", n)
	}
}

func TestTransportFailsClosed(t *testing.T) {
	e := newEndpoint(t)
	e.reply = func(w http.ResponseWriter) { http.Error(w, `{"error":"access_denied"}`, http.StatusForbidden) }
	var upstream atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { upstream.Add(1) }))
	defer up.Close()
	s := NewSource(e.config(), nil)
	s.SetSubject(Subject{Token: subject})
	c := &http.Client{Transport: &Transport{Source: s, Base: up.Client().Transport}}
	req, _ := http.NewRequestWithContext(bounded(t), "POST", up.URL, strings.NewReader("{}"))
	_, err := c.Do(req)
	if err == nil || !strings.Contains(err.Error(), "access_denied") {
		t.Fatalf("err = %v", err)
	}
	if upstream.Load() != 0 {
		t.Error("the request reached the upstream")
	}
}

func TestTransportSendsExchangedToken(t *testing.T) {
	e := newEndpoint(t)
	var got atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got.Store(r.Header.Values("Authorization")) }))
	defer up.Close()
	s := NewSource(e.config(), nil)
	s.SetSubject(Subject{Token: subject})
	c := &http.Client{Transport: &Transport{Source: s, Base: up.Client().Transport}}
	req, _ := http.NewRequestWithContext(bounded(t), "GET", up.URL, nil)
	req.Header.Set("Authorization", "Bearer "+subject)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v := got.Load().([]string); len(v) != 1 || v[0] != "Bearer exchanged-1" {
		t.Errorf("upstream saw Authorization %q", v)
	}
}

// TestSourceWaitEndsWithContext checks that a request waiting for another
// one's hung exchange gives up with its own context.
func TestSourceWaitEndsWithContext(t *testing.T) {
	e := newEndpoint(t)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	e.reply = func(w http.ResponseWriter) {
		entered <- struct{}{}
		<-release
		http.Error(w, `{"error":"temporarily_unavailable"}`, http.StatusServiceUnavailable)
	}
	defer close(release)
	s := NewSource(e.config(), nil)
	s.SetSubject(Subject{Token: subject})
	first := make(chan error, 1)
	go func() { _, err := s.Token(bounded(t)); first <- err }()
	<-entered
	ctx, cancel := context.WithCancel(bounded(t))
	cancel()
	if _, err := s.Token(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting Token = %v, want context.Canceled", err)
	}
	release <- struct{}{}
	if err := <-first; err == nil {
		t.Error("the hung exchange succeeded")
	}
}
