package clientreg

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/outbound"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// docServer is an https server for metadata documents whose handler a
// test can change, counting the requests it gets.
type docServer struct {
	*httptest.Server
	hits    atomic.Int64
	mu      sync.Mutex
	handler http.HandlerFunc
}

func newDocServer(t *testing.T) *docServer {
	t.Helper()
	s := &docServer{}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		h := s.handler
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	s.serve(s.document(nil), "max-age=600")
	return s
}

// clientID is the URL of the document the server serves.
func (s *docServer) clientID() string { return s.URL + "/client.json" }

// document returns a valid metadata document for s, changed by fields
// (a nil value removes the field).
func (s *docServer) document(fields map[string]any) []byte {
	doc := map[string]any{
		"client_id":     s.clientID(),
		"client_name":   "Example MCP Client",
		"redirect_uris": []string{"http://127.0.0.1/callback", "https://app.example.com/callback"},
	}
	maps.Copy(doc, fields)
	for k, v := range doc {
		if v == nil {
			delete(doc, k)
		}
	}
	b, _ := json.Marshal(doc)
	return b
}

// serve makes s answer with body as application/json and cacheControl.
func (s *docServer) serve(body []byte, cacheControl string) {
	s.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if cacheControl != "" {
			w.Header().Set("Cache-Control", cacheControl)
		}
		w.Write(body)
	})
}

func (s *docServer) setHandler(h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = h
}

// rootCAs is a pool that trusts s.
func (s *docServer) rootCAs() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(s.Certificate())
	return pool
}

// fetcher returns a Fetcher that trusts s and may reach it on loopback.
func (s *docServer) fetcher(o FetchOptions, clock *fakeClock) *Fetcher {
	o.AllowPrivateAddresses = true
	deps := FetchDeps{RootCAs: s.rootCAs()}
	if clock != nil {
		deps.Now = clock.Now
	}
	return NewFetcher(o, deps)
}

func TestFetcherGet(t *testing.T) {
	s := newDocServer(t)
	f := s.fetcher(FetchOptions{}, nil)
	m, err := f.Get(t.Context(), s.clientID())
	if err != nil {
		t.Fatal(err)
	}
	want := &Metadata{
		ClientID:                s.clientID(),
		ClientName:              "Example MCP Client",
		RedirectURIs:            []string{"http://127.0.0.1/callback", "https://app.example.com/callback"},
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		TokenEndpointAuthMethod: "none",
	}
	got, _ := json.Marshal(m)
	wantJSON, _ := json.Marshal(want)
	if string(got) != string(wantJSON) {
		t.Errorf("metadata\n got %s\nwant %s", got, wantJSON)
	}
	if !m.MatchRedirectURI("http://127.0.0.1:49152/callback") {
		t.Error("the loopback redirect URI does not match on another port")
	}
}

func TestFetcherRefuses(t *testing.T) {
	big := strings.Repeat("x", DefaultMaxDocumentBytes)
	tests := []struct {
		name    string
		opts    FetchOptions
		handler func(s *docServer) http.HandlerFunc
		wantErr error
		want    string // a part of the error
		// wantCode, for ErrDocument, is the RegistrationError's code.
		wantCode string
	}{
		{
			name:    "status 404",
			handler: func(s *docServer) http.HandlerFunc { return http.NotFound },
			wantErr: ErrFetch, want: "status 404",
		},
		{
			name: "status 500",
			handler: func(s *docServer) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) { http.Error(w, "x", 500) }
			},
			wantErr: ErrFetch, want: "status 500",
		},
		{
			name:    "Content-Type text/html",
			handler: func(s *docServer) http.HandlerFunc { return respond("text/html", "", s.document(nil)) },
			wantErr: ErrFetch, want: "Content-Type",
		},
		{
			name:    "Content-Type missing",
			handler: func(s *docServer) http.HandlerFunc { return respond("", "", s.document(nil)) },
			wantErr: ErrFetch, want: "Content-Type",
		},
		{
			name:    "Content-Type application/jsonp",
			handler: func(s *docServer) http.HandlerFunc { return respond("application/jsonp", "", s.document(nil)) },
			wantErr: ErrFetch, want: "Content-Type",
		},
		{
			name: "a body over the default cap, with Content-Length",
			handler: func(s *docServer) http.HandlerFunc {
				return respond("application/json", "", s.document(map[string]any{"pad": big}))
			},
			wantErr: ErrFetch, want: "larger than 5120 bytes",
		},
		{
			name: "a body over the default cap, streamed",
			handler: func(s *docServer) http.HandlerFunc {
				doc := s.document(map[string]any{"pad": big})
				return func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.Write(doc[:100])
					w.(http.Flusher).Flush()
					w.Write(doc[100:])
				}
			},
			wantErr: ErrFetch, want: "larger than 5120 bytes",
		},
		{
			name:    "a body over a configured cap",
			opts:    FetchOptions{MaxBodyBytes: 100},
			handler: func(s *docServer) http.HandlerFunc { return respond("application/json", "", s.document(nil)) },
			wantErr: ErrFetch, want: "larger than 100 bytes",
		},
		{
			name:    "not JSON",
			handler: func(s *docServer) http.HandlerFunc { return respond("application/json", "", []byte("<html>")) },
			wantErr: ErrDocument, wantCode: CodeInvalidClientMetadata, want: "JSON object",
		},
		{
			name: "client_id another URL",
			handler: func(s *docServer) http.HandlerFunc {
				return respond("application/json", "", s.document(map[string]any{"client_id": "https://other.example/client.json"}))
			},
			wantErr: ErrDocument, wantCode: CodeInvalidClientMetadata, want: "client_id",
		},
		{
			name: "client_id with a trailing slash",
			handler: func(s *docServer) http.HandlerFunc {
				return respond("application/json", "", s.document(map[string]any{"client_id": s.clientID() + "/"}))
			},
			wantErr: ErrDocument, wantCode: CodeInvalidClientMetadata, want: "client_id",
		},
		{
			name: "client_id in other case",
			handler: func(s *docServer) http.HandlerFunc {
				return respond("application/json", "", s.document(map[string]any{"client_id": strings.ToUpper(s.clientID())}))
			},
			wantErr: ErrDocument, wantCode: CodeInvalidClientMetadata, want: "client_id",
		},
		{
			name: "client_id missing",
			handler: func(s *docServer) http.HandlerFunc {
				return respond("application/json", "", s.document(map[string]any{"client_id": nil}))
			},
			wantErr: ErrDocument, wantCode: CodeInvalidClientMetadata, want: "client_id",
		},
		{
			name: "redirect_uris missing",
			handler: func(s *docServer) http.HandlerFunc {
				return respond("application/json", "", s.document(map[string]any{"redirect_uris": nil}))
			},
			wantErr: ErrDocument, wantCode: CodeInvalidRedirectURI, want: "redirect_uris is required",
		},
		{
			name: "a javascript: redirect URI",
			handler: func(s *docServer) http.HandlerFunc {
				return respond("application/json", "", s.document(map[string]any{"redirect_uris": []string{"javascript:alert(1)"}}))
			},
			wantErr: ErrDocument, wantCode: CodeInvalidRedirectURI, want: "javascript",
		},
		{
			name: "client_secret",
			handler: func(s *docServer) http.HandlerFunc {
				return respond("application/json", "", s.document(map[string]any{"client_secret": "s3cret"}))
			},
			wantErr: ErrDocument, wantCode: CodeInvalidClientMetadata, want: "client_secret",
		},
		{
			name: "client_secret null",
			handler: func(s *docServer) http.HandlerFunc {
				return respond("application/json", "", []byte(strings.Replace(string(s.document(nil)), "{", `{"client_secret":null,`, 1)))
			},
			wantErr: ErrDocument, wantCode: CodeInvalidClientMetadata, want: "client_secret",
		},
		{
			name: "client_secret_expires_at",
			handler: func(s *docServer) http.HandlerFunc {
				return respond("application/json", "", s.document(map[string]any{"client_secret_expires_at": 0}))
			},
			wantErr: ErrDocument, wantCode: CodeInvalidClientMetadata, want: "client_secret",
		},
		{
			name: "token_endpoint_auth_method client_secret_basic",
			handler: func(s *docServer) http.HandlerFunc {
				return respond("application/json", "", s.document(map[string]any{"token_endpoint_auth_method": "client_secret_basic"}))
			},
			wantErr: ErrDocument, wantCode: CodeInvalidClientMetadata, want: "shared secret",
		},
		{
			name: "token_endpoint_auth_method client_secret_post",
			handler: func(s *docServer) http.HandlerFunc {
				return respond("application/json", "", s.document(map[string]any{"token_endpoint_auth_method": "client_secret_post"}))
			},
			wantErr: ErrDocument, wantCode: CodeInvalidClientMetadata, want: "shared secret",
		},
		{
			name: "token_endpoint_auth_method private_key_jwt",
			handler: func(s *docServer) http.HandlerFunc {
				return respond("application/json", "", s.document(map[string]any{"token_endpoint_auth_method": "private_key_jwt", "jwks_uri": "https://app.example.com/jwks"}))
			},
			wantErr: ErrDocument, wantCode: CodeInvalidClientMetadata, want: "not supported",
		},
		{
			name: "an http client_uri",
			handler: func(s *docServer) http.HandlerFunc {
				return respond("application/json", "", s.document(map[string]any{"client_uri": "http://app.example.com/"}))
			},
			wantErr: ErrDocument, wantCode: CodeInvalidClientMetadata, want: "client_uri",
		},
		{
			name: "more redirect URIs than configured",
			opts: FetchOptions{MaxRedirectURIs: 1},
			handler: func(s *docServer) http.HandlerFunc {
				return respond("application/json", "", s.document(nil))
			},
			wantErr: ErrDocument, wantCode: CodeInvalidRedirectURI, want: "more than the 1 allowed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newDocServer(t)
			s.setHandler(tt.handler(s))
			f := s.fetcher(tt.opts, nil)
			m, err := f.Get(t.Context(), s.clientID())
			if m != nil || !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Get = %+v, %v; want %v with %q", m, err, tt.wantErr, tt.want)
			}
			var rerr *RegistrationError
			if gotCode := errors.As(err, &rerr); gotCode != (tt.wantCode != "") || gotCode && rerr.Code != tt.wantCode {
				t.Errorf("err = %v, want RegistrationError code %q", err, tt.wantCode)
			}
		})
	}
}

func respond(contentType, cacheControl string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		} else {
			w.Header()["Content-Type"] = nil // no sniffing
		}
		if cacheControl != "" {
			w.Header().Set("Cache-Control", cacheControl)
		}
		w.Write(body)
	}
}

func TestFetcherRefusesALargeContentLengthBeforeReading(t *testing.T) {
	s := newDocServer(t)
	release := make(chan struct{})
	defer close(release)
	s.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "1000000")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select { // the body never comes
		case <-r.Context().Done():
		case <-release:
		}
	})
	_, err := s.fetcher(FetchOptions{Timeout: 2 * time.Second}, nil).Get(t.Context(), s.clientID())
	if !errors.Is(err, ErrFetch) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("err = %v, want ErrFetch: larger than", err)
	}
}

func TestFetcherAcceptsJSONWithParameters(t *testing.T) {
	s := newDocServer(t)
	s.setHandler(respond("application/json; charset=utf-8", "", s.document(nil)))
	if _, err := s.fetcher(FetchOptions{}, nil).Get(t.Context(), s.clientID()); err != nil {
		t.Fatal(err)
	}
}

func TestFetcherRefusesAnInvalidClientIDWithoutFetching(t *testing.T) {
	s := newDocServer(t)
	f := s.fetcher(FetchOptions{}, nil)
	for _, id := range []string{
		strings.Replace(s.clientID(), "https://", "http://", 1),
		s.URL + "/",
		s.clientID() + "#x",
		strings.Replace(s.clientID(), "https://", "https://user@", 1),
		s.URL + "/a/../client.json",
	} {
		if _, err := f.Get(t.Context(), id); !errors.Is(err, ErrInvalidClientID) {
			t.Errorf("Get(%q) = %v, want ErrInvalidClientID", id, err)
		}
	}
	if n := s.hits.Load(); n != 0 {
		t.Errorf("the server got %d requests, want none", n)
	}
}

func TestFetcherInsecureAllowHTTP(t *testing.T) {
	var hits atomic.Int64
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"client_id":%q,"redirect_uris":["http://127.0.0.1/cb"]}`, srv.URL+"/c")
	}))
	defer srv.Close()

	f := NewFetcher(FetchOptions{AllowPrivateAddresses: true}, FetchDeps{})
	if _, err := f.Get(t.Context(), srv.URL+"/c"); !errors.Is(err, ErrInvalidClientID) {
		t.Errorf("http client_id without InsecureAllowHTTP: err = %v, want ErrInvalidClientID", err)
	}
	f = NewFetcher(FetchOptions{AllowPrivateAddresses: true, InsecureAllowHTTP: true}, FetchDeps{})
	if _, err := f.Get(t.Context(), srv.URL+"/c"); err != nil {
		t.Errorf("http client_id with InsecureAllowHTTP: %v", err)
	}
	if hits.Load() != 1 {
		t.Errorf("hits = %d, want 1", hits.Load())
	}
}

func TestFetcherFollowsNoRedirect(t *testing.T) {
	var targetHits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		targetHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	defer target.Close()
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			s := newDocServer(t)
			// A redirect to a private address: the metadata endpoint of a
			// cloud, or here a server on loopback.
			s.setHandler(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.URL+"/latest/meta-data", status)
			})
			_, err := s.fetcher(FetchOptions{}, nil).Get(t.Context(), s.clientID())
			if !errors.Is(err, ErrFetch) || !strings.Contains(err.Error(), "redirects are not followed") {
				t.Errorf("err = %v, want ErrFetch: redirects are not followed", err)
			}
		})
	}
	if n := targetHits.Load(); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}
}

// supportsIPv6 reports whether this machine can open IPv6 sockets.
func supportsIPv6() bool {
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func TestFetcherRefusesNonPublicAddresses(t *testing.T) {
	s := newDocServer(t)
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	f := NewFetcher(FetchOptions{}, FetchDeps{RootCAs: s.rootCAs()})
	tests := []struct {
		name     string
		clientID string
		ipv6     bool
	}{
		{name: "the test server on loopback", clientID: s.clientID()},
		{name: "a name resolving to loopback", clientID: "https://localhost:" + port + "/client.json"},
		{name: "loopback elsewhere in 127/8", clientID: "https://127.0.0.2:" + port + "/client.json"},
		{name: "10/8", clientID: "https://10.1.2.3/client.json"},
		{name: "192.168/16", clientID: "https://192.168.0.1/client.json"},
		{name: "the cloud metadata address", clientID: "https://169.254.169.254/latest/meta-data/client.json"},
		{name: "CGNAT", clientID: "https://100.64.0.1/client.json"},
		{name: "unspecified", clientID: "https://0.0.0.0:" + port + "/client.json"},
		{name: "IPv6 loopback", clientID: "https://[::1]:" + port + "/client.json", ipv6: true},
		{name: "IPv6 unique local", clientID: "https://[fd00::1]/client.json", ipv6: true},
		{name: "IPv6 link-local", clientID: "https://[fe80::1]/client.json", ipv6: true},
		{name: "IPv4-mapped loopback", clientID: "https://[::ffff:127.0.0.1]:" + port + "/client.json"},
		{name: "IPv4-mapped metadata address", clientID: "https://[::ffff:169.254.169.254]/client.json"},
	}
	v6 := supportsIPv6()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.ipv6 && !v6 {
				// No IPv6 here, so no dial reaches the dialer's check: judge
				// the address the check would see instead.
				u, err := url.Parse(tt.clientID)
				if err != nil {
					t.Fatal(err)
				}
				a, err := netip.ParseAddr(u.Hostname())
				if err != nil {
					t.Fatal(err)
				}
				if !outbound.ForbiddenAddr(a) {
					t.Fatalf("%s is not refused", a)
				}
				return
			}
			m, err := f.Get(t.Context(), tt.clientID)
			if m != nil || !errors.Is(err, ErrFetch) {
				t.Fatalf("Get = %+v, %v; want ErrFetch", m, err)
			}
			if !errors.Is(err, outbound.ErrForbiddenAddress) {
				t.Errorf("err = %v, want the address refused", err)
			}
			if testing.Verbose() {
				t.Log(err)
			}
		})
	}
	if n := s.hits.Load(); n != 0 {
		t.Errorf("the server got %d requests, want none", n)
	}
}

func TestFetcherTimeout(t *testing.T) {
	tests := []struct {
		name        string
		sendHeaders bool
	}{
		{name: "no headers"},
		{name: "headers, then half a body", sendHeaders: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newDocServer(t)
			release := make(chan struct{})
			defer close(release)
			s.setHandler(func(w http.ResponseWriter, r *http.Request) {
				if tt.sendHeaders {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusOK)
					w.Write([]byte(`{"client_id":`))
					w.(http.Flusher).Flush()
				}
				select { // the rest never comes
				case <-r.Context().Done():
				case <-release:
				}
			})
			f := s.fetcher(FetchOptions{Timeout: 50 * time.Millisecond}, nil)
			start := time.Now()
			_, err := f.Get(t.Context(), s.clientID())
			if !errors.Is(err, ErrFetch) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want ErrFetch and context.DeadlineExceeded", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Get took %v with a 50ms timeout", d)
			}
		})
	}
}

func TestFetcherGetReturnsWhenItsContextEnds(t *testing.T) {
	s := newDocServer(t)
	started, release := make(chan struct{}), make(chan struct{})
	doc := s.document(nil)
	s.setHandler(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		w.Header().Set("Content-Type", "application/json")
		w.Write(doc)
	})
	clock := newFakeClock()
	f := s.fetcher(FetchOptions{}, clock)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-started; cancel() }()
	if _, err := f.Get(ctx, s.clientID()); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	close(release)
	// The fetch went on without the caller and its result is cached; a
	// Get waits for it if it is still in flight.
	if _, err := f.Get(t.Context(), s.clientID()); err != nil {
		t.Fatal(err)
	}
	if n := s.hits.Load(); n != 1 {
		t.Errorf("hits = %d, want 1", n)
	}
}

func TestFetcherCache(t *testing.T) {
	tests := []struct {
		name         string
		cacheControl string
		opts         FetchOptions
		kept         time.Duration // 0: not cached at all
	}{
		{name: "max-age within bounds", cacheControl: "max-age=600", kept: 600 * time.Second},
		{name: "max-age among other directives", cacheControl: "public, max-age=3600, must-revalidate", kept: time.Hour},
		{name: "max-age quoted", cacheControl: `max-age="600"`, kept: 600 * time.Second},
		{name: "max-age below the minimum", cacheControl: "max-age=10", kept: DefaultMinCacheTTL},
		{name: "max-age zero", cacheControl: "max-age=0", kept: DefaultMinCacheTTL},
		{name: "max-age above the maximum", cacheControl: "max-age=999999999999", kept: DefaultMaxCacheTTL},
		{name: "no Cache-Control", kept: DefaultMinCacheTTL},
		{name: "max-age malformed", cacheControl: "max-age=soon", kept: DefaultMinCacheTTL},
		{name: "no-cache", cacheControl: "no-cache", kept: DefaultMinCacheTTL},
		{name: "no-store", cacheControl: "no-store"},
		{name: "no-store with max-age", cacheControl: "max-age=600, no-store"},
		{name: "NO-STORE", cacheControl: "NO-STORE"},
		{name: "configured minimum", cacheControl: "max-age=10", opts: FetchOptions{MinCacheTTL: time.Minute}, kept: time.Minute},
		{name: "configured maximum", cacheControl: "max-age=7200", opts: FetchOptions{MaxCacheTTL: time.Hour}, kept: time.Hour},
		{name: "a maximum below the minimum", cacheControl: "max-age=7200", opts: FetchOptions{MinCacheTTL: 2 * time.Hour, MaxCacheTTL: time.Hour}, kept: 2 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newDocServer(t)
			s.serve(s.document(nil), tt.cacheControl)
			clock := newFakeClock()
			f := s.fetcher(tt.opts, clock)
			get := func(wantHits int64) {
				t.Helper()
				if _, err := f.Get(t.Context(), s.clientID()); err != nil {
					t.Fatal(err)
				}
				if n := s.hits.Load(); n != wantHits {
					t.Fatalf("after %v: hits = %d, want %d", clock.Now().Sub(newFakeClock().Now()), n, wantHits)
				}
			}
			get(1)
			if tt.kept == 0 {
				get(2)
				return
			}
			get(1)
			clock.Advance(tt.kept - time.Second)
			get(1)
			clock.Advance(time.Second)
			get(2)
		})
	}
}

func TestFetcherCachesFailuresBriefly(t *testing.T) {
	tests := []struct {
		name    string
		broken  func(s *docServer) http.HandlerFunc
		opts    FetchOptions
		ttl     time.Duration
		wantErr error
	}{
		{name: "not found", broken: func(*docServer) http.HandlerFunc { return http.NotFound }, ttl: DefaultErrorCacheTTL, wantErr: ErrFetch},
		{name: "over the size cap", broken: func(s *docServer) http.HandlerFunc {
			return respond("application/json", "max-age=86400", s.document(map[string]any{"pad": strings.Repeat("x", DefaultMaxDocumentBytes)}))
		}, ttl: DefaultErrorCacheTTL, wantErr: ErrFetch},
		{name: "a refused document", broken: func(s *docServer) http.HandlerFunc {
			return respond("application/json", "max-age=86400", s.document(map[string]any{"client_secret": "x"}))
		}, ttl: DefaultErrorCacheTTL, wantErr: ErrDocument},
		{name: "a configured TTL", broken: func(*docServer) http.HandlerFunc { return http.NotFound }, opts: FetchOptions{ErrorCacheTTL: time.Minute}, ttl: time.Minute, wantErr: ErrFetch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newDocServer(t)
			s.setHandler(tt.broken(s))
			clock := newFakeClock()
			f := s.fetcher(tt.opts, clock)
			for range 3 {
				if _, err := f.Get(t.Context(), s.clientID()); !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			}
			if n := s.hits.Load(); n != 1 {
				t.Fatalf("hits = %d after three Gets, want 1", n)
			}
			var rerr *RegistrationError
			if _, err := f.Get(t.Context(), s.clientID()); tt.wantErr == ErrDocument && (!errors.As(err, &rerr) || rerr.Code != CodeInvalidClientMetadata) {
				t.Errorf("a cached refusal: err = %v, want a RegistrationError", err)
			}
			// The document is fixed; the failure is forgotten after ttl.
			s.serve(s.document(nil), "max-age=600")
			clock.Advance(tt.ttl - time.Second)
			if _, err := f.Get(t.Context(), s.clientID()); !errors.Is(err, tt.wantErr) {
				t.Fatalf("before the error TTL: err = %v, want %v", err, tt.wantErr)
			}
			clock.Advance(time.Second)
			if _, err := f.Get(t.Context(), s.clientID()); err != nil {
				t.Fatalf("after the error TTL: %v", err)
			}
			if n := s.hits.Load(); n != 2 {
				t.Errorf("hits = %d, want 2", n)
			}
		})
	}
}

func TestFetcherSharesOneFetch(t *testing.T) {
	const n = 16
	s := newDocServer(t)
	var joined sync.WaitGroup
	joined.Add(n)
	allJoined := make(chan struct{})
	go func() { joined.Wait(); close(allJoined) }()
	doc := s.document(nil)
	s.setHandler(func(w http.ResponseWriter, r *http.Request) {
		// Answer once every Get has looked in the cache and found
		// nothing: without a shared fetch, each would fetch.
		<-allJoined
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=600")
		w.Write(doc)
	})
	f := s.fetcher(FetchOptions{}, newFakeClock())
	f.beforeFlight = joined.Done

	results := make([]*Metadata, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			m, err := f.Get(t.Context(), s.clientID())
			if err != nil {
				t.Error(err)
			}
			results[i] = m
		})
	}
	wg.Wait()
	if h := s.hits.Load(); h != 1 {
		t.Errorf("%d concurrent Gets made %d fetches, want 1", n, h)
	}
	for i := 1; i < n; i++ {
		if results[i] != nil && results[i] == results[0] {
			t.Fatal("two callers got the same *Metadata")
		}
	}
}

// mapCache is a Cache that never expires anything itself, shared by two
// fetchers as replicas share Redis.
type mapCache struct {
	mu   sync.Mutex
	m    map[string][]byte
	ttls map[string]time.Duration
	err  error
}

func (c *mapCache) Get(_ context.Context, key string) ([]byte, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, false, c.err
	}
	v, ok := c.m[key]
	return v, ok, nil
}

func (c *mapCache) Set(_ context.Context, key string, val []byte, ttl time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if c.m == nil {
		c.m, c.ttls = map[string][]byte{}, map[string]time.Duration{}
	}
	c.m[key], c.ttls[key] = val, ttl
	return nil
}

func TestFetcherSharedCache(t *testing.T) {
	s := newDocServer(t)
	clock := newFakeClock()
	cache := &mapCache{}
	replica := func() *Fetcher {
		return NewFetcher(FetchOptions{AllowPrivateAddresses: true}, FetchDeps{Cache: cache, Now: clock.Now, RootCAs: s.rootCAs()})
	}
	a, b := replica(), replica()
	if _, err := a.Get(t.Context(), s.clientID()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(t.Context(), s.clientID()); err != nil {
		t.Fatal(err)
	}
	if n := s.hits.Load(); n != 1 {
		t.Errorf("two replicas sharing a cache fetched %d times, want 1", n)
	}
	key := cacheKeyPrefix + s.clientID()
	if ttl := cache.ttls[key]; ttl != 600*time.Second {
		t.Errorf("Set ttl = %v, want 10m0s", ttl)
	}
	// A cache that keeps the entry too long does not keep it alive.
	clock.Advance(600 * time.Second)
	if _, err := b.Get(t.Context(), s.clientID()); err != nil {
		t.Fatal(err)
	}
	if n := s.hits.Load(); n != 2 {
		t.Errorf("an expired entry was used: hits = %d, want 2", n)
	}
	// An entry that no longer passes validation is not used.
	cache.Set(t.Context(), key, []byte(`{"doc":{"client_id":"https://other.example/c","redirect_uris":["https://a/cb"]},"exp":99999999999999}`), time.Hour)
	m, err := b.Get(t.Context(), s.clientID())
	if err != nil || m.ClientID != s.clientID() {
		t.Fatalf("Get = %+v, %v", m, err)
	}
	if n := s.hits.Load(); n != 3 {
		t.Errorf("an invalid cached document was used: hits = %d, want 3", n)
	}
}

func TestFetcherCarriesOnWhenTheCacheFails(t *testing.T) {
	s := newDocServer(t)
	f := NewFetcher(FetchOptions{AllowPrivateAddresses: true}, FetchDeps{Cache: &mapCache{err: errors.New("redis down")}, RootCAs: s.rootCAs()})
	for range 2 {
		if _, err := f.Get(t.Context(), s.clientID()); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.hits.Load(); n != 2 {
		t.Errorf("hits = %d, want 2 (nothing cached)", n)
	}
}

func TestFetcherReturnsACopy(t *testing.T) {
	s := newDocServer(t)
	f := s.fetcher(FetchOptions{}, newFakeClock())
	m, err := f.Get(t.Context(), s.clientID())
	if err != nil {
		t.Fatal(err)
	}
	m.RedirectURIs[0] = "https://evil.example/cb"
	m2, err := f.Get(t.Context(), s.clientID())
	if err != nil {
		t.Fatal(err)
	}
	if m2.RedirectURIs[0] != "http://127.0.0.1/callback" {
		t.Errorf("a caller's change reached the next caller: %v", m2.RedirectURIs)
	}
}

func TestNewFetcherWarnsAboutWeakeningOptions(t *testing.T) {
	tests := []struct {
		name string
		opts FetchOptions
		want []string
	}{
		{name: "defaults"},
		{name: "AllowPrivateAddresses", opts: FetchOptions{AllowPrivateAddresses: true}, want: []string{"allow_private_addresses"}},
		{name: "InsecureAllowHTTP", opts: FetchOptions{InsecureAllowHTTP: true}, want: []string{"insecure_allow_http"}},
		{name: "both", opts: FetchOptions{AllowPrivateAddresses: true, InsecureAllowHTTP: true}, want: []string{"allow_private_addresses", "insecure_allow_http"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf strings.Builder
			NewFetcher(tt.opts, FetchDeps{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(tt.want) == 0 {
				if buf.Len() != 0 {
					t.Errorf("logged %q, want nothing", buf.String())
				}
				return
			}
			if len(lines) != len(tt.want) {
				t.Fatalf("logged %q, want %d lines", buf.String(), len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(lines[i], "level=WARN") || !strings.Contains(lines[i], w) {
					t.Errorf("line %d = %q, want a warning naming %s", i, lines[i], w)
				}
			}
		})
	}
}
