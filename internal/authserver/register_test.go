package authserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ory/fosite"

	"github.com/portcullis-mcp/portcullis/internal/clientreg"
	"github.com/portcullis-mcp/portcullis/internal/kv"
)

func (ts *testServer) register(t *testing.T, body string, hdr http.Header) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.srv.URL+PathRegister, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// signInAs runs the flow for clientID with redirect, returning the
// consent page (or the redirect back when consent is remembered).
func (ts *testServer) flowFor(t *testing.T, clientID, redirect string) (*http.Response, string, *browser, string) {
	t.Helper()
	b := newBrowser(t)
	authURL, verifier := ts.authorizeURL(url.Values{"client_id": {clientID}, "redirect_uri": {redirect}})
	resp, page := ts.signIn(b, authURL)
	return resp, page, b, verifier
}

func TestDynamicRegistration(t *testing.T) {
	const good = `{"client_name":"Agent Smith","redirect_uris":["http://127.0.0.1:7777/callback"],"token_endpoint_auth_method":"client_secret_basic"}`
	t.Run("registered client signs in", func(t *testing.T) {
		ts := startServer(t)
		status, reg := ts.register(t, good, nil)
		if status != http.StatusCreated {
			t.Fatalf("register: %d %v", status, reg)
		}
		id, _ := reg["client_id"].(string)
		if !strings.HasPrefix(id, "dcr-") || reg["token_endpoint_auth_method"] != "none" || reg["client_secret"] != nil {
			t.Fatalf("registration = %v: want a dcr- client_id, auth method none, no secret", reg)
		}
		resp, page, b, verifier := ts.flowFor(t, id, testRedirect)
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, "Agent Smith") || !strings.Contains(page, "registered itself") {
			t.Fatalf("consent page %d: want the self-declared name and the note", resp.StatusCode)
		}
		resp, _ = ts.approve(b, page, "approve")
		status, tok := ts.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {ts.codeFrom(t, resp)}, "code_verifier": {verifier}, "client_id": {id}, "redirect_uri": {testRedirect}})
		if status != http.StatusOK {
			t.Fatalf("token: %d %v", status, tok)
		}
		_, claims := decodeJWT(t, tok["access_token"].(string))
		if claims["client_id"] != id {
			t.Errorf("client_id claim = %v, want %s", claims["client_id"], id)
		}
	})
	t.Run("metadata names the endpoint", func(t *testing.T) {
		ts := startServer(t)
		if got := ts.metadata()["registration_endpoint"]; got != ts.Issuer()+PathRegister {
			t.Fatalf("registration_endpoint = %v", got)
		}
	})
	for _, tc := range []struct{ name, body, want string }{
		{"javascript redirect", `{"redirect_uris":["javascript:alert(1)"]}`, clientreg.CodeInvalidRedirectURI},
		{"http redirect off loopback", `{"redirect_uris":["http://evil.example/cb"]}`, clientreg.CodeInvalidRedirectURI},
		{"no redirect", `{"client_name":"x"}`, clientreg.CodeInvalidRedirectURI},
		{"implicit grant", `{"redirect_uris":["https://app.example/cb"],"grant_types":["implicit"]}`, clientreg.CodeInvalidClientMetadata},
		{"scope not issued", `{"redirect_uris":["https://app.example/cb"],"scope":"root"}`, clientreg.CodeInvalidClientMetadata},
		{"not JSON", `redirect_uris=x`, clientreg.CodeInvalidClientMetadata},
		{"huge", `{"redirect_uris":["https://app.example/cb"],"client_name":"` + strings.Repeat("a", 20<<10) + `"}`, clientreg.CodeInvalidClientMetadata},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			ts := startServer(t)
			status, body := ts.register(t, tc.body, nil)
			if status != http.StatusBadRequest || body["error"] != tc.want {
				t.Fatalf("%d %v, want 400 %s", status, body, tc.want)
			}
		})
	}
	t.Run("token mode", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "iat")
		os.WriteFile(file, []byte("initial-access-token-0123456789\n"), 0o600)
		ts := startServer(t, func(o *Options) {
			o.Registration.Mode = RegistrationToken
			o.Registration.InitialAccessTokenFile = file
		})
		for _, hdr := range []http.Header{nil, {"Authorization": {"Bearer wrong"}}, {"Authorization": {"initial-access-token-0123456789"}}} {
			if status, _ := ts.register(t, good, hdr); status != http.StatusUnauthorized {
				t.Errorf("%v: %d, want 401", hdr, status)
			}
		}
		if status, body := ts.register(t, good, http.Header{"Authorization": {"Bearer initial-access-token-0123456789"}}); status != http.StatusCreated {
			t.Errorf("with the token: %d %v", status, body)
		}
	})
	t.Run("off", func(t *testing.T) {
		ts := startServer(t, func(o *Options) { o.Registration.Mode = RegistrationOff })
		if status, _ := ts.register(t, good, nil); status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			t.Errorf("register with registration off: %d", status)
		}
		if _, ok := ts.metadata()["registration_endpoint"]; ok {
			t.Error("metadata names a registration endpoint that is off")
		}
	})
	t.Run("flood capped per replica", func(t *testing.T) {
		ts := startServer(t, func(o *Options) { o.Registration.PerMinute = 3 })
		for i := range 3 {
			if status, _ := ts.register(t, good, nil); status != http.StatusCreated {
				t.Fatalf("registration %d: %d", i+1, status)
			}
		}
		if status, _ := ts.register(t, good, nil); status != http.StatusTooManyRequests {
			t.Fatalf("registration over the cap: %d, want 429", status)
		}
	})
	t.Run("registrations expire unless used", func(t *testing.T) {
		var mu sync.Mutex
		now := time.Now()
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		ts := startServerDeps(t, func(d *Deps) { d.KV = kv.NewMemory(clock); d.Now = clock }, func(o *Options) { o.Registration.TTL = time.Hour })
		_, a := ts.register(t, good, nil)
		_, b := ts.register(t, good, nil)
		mu.Lock()
		now = now.Add(50 * time.Minute)
		mu.Unlock()
		resp, page, br, _ := ts.flowFor(t, b["client_id"].(string), testRedirect)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("client b: %d", resp.StatusCode)
		}
		ts.approve(br, page, "approve") // used: its registration lives on
		mu.Lock()
		now = now.Add(50 * time.Minute)
		mu.Unlock()
		authURL, _ := ts.authorizeURL(url.Values{"client_id": {a["client_id"].(string)}})
		if resp, _ := newBrowser(t).get(authURL); resp.StatusCode < 400 || resp.Header.Get("Location") != "" {
			t.Errorf("expired client a: %d %q, want refused", resp.StatusCode, resp.Header.Get("Location"))
		}
		authURL, _ = ts.authorizeURL(url.Values{"client_id": {b["client_id"].(string)}})
		if resp, _ := newBrowser(t).get(authURL); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("used client b: %d, want on to the IdP", resp.StatusCode)
		}
	})
}

// startDocumentServer serves client metadata documents over TLS; docs maps
// a path to the document's JSON (with %s for the server's URL).
func startDocumentServer(t *testing.T, docs map[string]string) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(documents(docs, nil))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// documents serves docs (see startDocumentServer), counting requests in
// n when it is not nil.
func documents(docs map[string]string, n *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n != nil {
			n.Add(1)
		}
		doc, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		scheme := "https"
		if r.TLS == nil {
			scheme = "http"
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=600")
		fmt.Fprintf(w, doc, scheme+"://"+r.Host)
	})
}

func TestClientMetadataDocuments(t *testing.T) {
	docs := startDocumentServer(t, map[string]string{
		"/client.json":    `{"client_id":"%s/client.json","client_name":"Doc Client","redirect_uris":["http://127.0.0.1:7777/callback"]}`,
		"/mismatch.json":  `{"client_id":"https://other.example/client.json","redirect_uris":["http://127.0.0.1:7777/callback"]}`,
		"/secret.json":    `{"client_id":"%s/secret.json","redirect_uris":["http://127.0.0.1:7777/callback"],"client_secret":"x"}`,
		"/elsewhere.json": `{"client_id":"%s/elsewhere.json","redirect_uris":["https://evil.example/cb"]}`,
	})
	withDocs := func(private bool) (func(*Deps), func(*Options)) {
		return func(d *Deps) {
				pool := docs.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
				d.CIMDRootCAs = pool
			}, func(o *Options) {
				o.ClientMetadataDocuments.AllowPrivateAddresses = private
			}
	}
	t.Run("a document client signs in", func(t *testing.T) {
		deps, opts := withDocs(true)
		ts := startServerDeps(t, deps, opts)
		if ts.metadata()["client_id_metadata_document_supported"] != true {
			t.Fatal("metadata does not say documents are supported")
		}
		id := docs.URL + "/client.json"
		resp, page, b, verifier := ts.flowFor(t, id, testRedirect)
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, "Doc Client") || !strings.Contains(page, "described by 127.0.0.1") {
			t.Fatalf("consent page %d: want the document's name and host", resp.StatusCode)
		}
		resp, _ = ts.approve(b, page, "approve")
		status, tok := ts.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {ts.codeFrom(t, resp)}, "code_verifier": {verifier}, "client_id": {id}, "redirect_uri": {testRedirect}})
		if status != http.StatusOK {
			t.Fatalf("token: %d %v", status, tok)
		}
	})
	for _, tc := range []struct {
		name, path, redirect string
		private              bool
	}{
		{"private address refused by default", "/client.json", testRedirect, false},
		{"client_id mismatch", "/mismatch.json", testRedirect, true},
		{"document with a secret", "/secret.json", testRedirect, true},
		{"redirect not in the document", "/elsewhere.json", "https://evil.example/other", true},
		{"no document", "/missing.json", testRedirect, true},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			deps, opts := withDocs(tc.private)
			ts := startServerDeps(t, deps, opts)
			authURL, _ := ts.authorizeURL(url.Values{"client_id": {docs.URL + tc.path}, "redirect_uri": {tc.redirect}})
			resp, body := newBrowser(t).get(authURL)
			if resp.StatusCode < 400 || resp.Header.Get("Location") != "" {
				t.Fatalf("%d %q: want an error page, no redirect", resp.StatusCode, resp.Header.Get("Location"))
			}
			if bytes.Contains([]byte(body), []byte("evil.example")) && tc.name != "redirect not in the document" {
				t.Errorf("page echoes the attacker's host: %s", body)
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		ts := startServer(t, func(o *Options) { o.ClientMetadataDocuments.Mode = "off" })
		if ts.metadata()["client_id_metadata_document_supported"] != false {
			t.Fatal("metadata says documents are supported")
		}
		authURL, _ := ts.authorizeURL(url.Values{"client_id": {docs.URL + "/client.json"}})
		if resp, _ := newBrowser(t).get(authURL); resp.StatusCode < 400 {
			t.Fatalf("%d: want refused", resp.StatusCode)
		}
	})
}

// TestClientMetadataDocumentsOverHTTP: with
// client_metadata_documents.insecure_allow_http an http:// client_id is a
// document URL, fetched through the same fetcher, whose address checks
// still refuse loopback unless allow_private_addresses is on too; without
// it (the default) an http:// client_id is no document.
func TestClientMetadataDocumentsOverHTTP(t *testing.T) {
	var requests atomic.Int32
	docs := httptest.NewServer(documents(map[string]string{
		"/client.json": `{"client_id":"%s/client.json","client_name":"Plain Doc Client","redirect_uris":["http://127.0.0.1:7777/callback"]}`,
	}, &requests))
	t.Cleanup(docs.Close)
	id := docs.URL + "/client.json"
	tests := []struct {
		name          string
		insecureHTTP  bool
		private       bool
		wantSignIn    bool
		wantErr       error // of looking the client up, when refused
		wantSupported bool
	}{
		{name: "insecure_allow_http and allow_private_addresses: the document's client signs in", insecureHTTP: true, private: true, wantSignIn: true, wantSupported: true},
		{name: "insecure_allow_http alone: a loopback document is still refused", insecureHTTP: true, wantErr: clientreg.ErrFetch, wantSupported: true},
		{name: "default: an http client_id names no document", private: true, wantErr: fosite.ErrNotFound, wantSupported: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requests.Store(0)
			ts := startServer(t, func(o *Options) {
				o.ClientMetadataDocuments.InsecureAllowHTTP = tt.insecureHTTP
				o.ClientMetadataDocuments.AllowPrivateAddresses = tt.private
			})
			if got := ts.metadata()["client_id_metadata_document_supported"]; got != tt.wantSupported {
				t.Errorf("client_id_metadata_document_supported = %v, want %v", got, tt.wantSupported)
			}
			if !tt.wantSignIn {
				authURL, _ := ts.authorizeURL(url.Values{"client_id": {id}})
				if resp, _ := newBrowser(t).get(authURL); resp.StatusCode < 400 || resp.Header.Get("Location") != "" {
					t.Fatalf("%d %q: want an error page, no redirect", resp.StatusCode, resp.Header.Get("Location"))
				}
				// The page says only that the client is unknown; the lookup
				// says why.
				if _, err := ts.clients.GetClient(context.Background(), id); !errors.Is(err, tt.wantErr) {
					t.Errorf("GetClient: %v, want %v", err, tt.wantErr)
				}
				if n := requests.Load(); n != 0 {
					t.Errorf("the document server got %d requests, want none", n)
				}
				return
			}
			resp, page, b, verifier := ts.flowFor(t, id, testRedirect)
			if resp.StatusCode != http.StatusOK || !strings.Contains(page, "Plain Doc Client") {
				t.Fatalf("consent page %d: want the document's name:\n%s", resp.StatusCode, page)
			}
			resp, _ = ts.approve(b, page, "approve")
			status, tok := ts.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {ts.codeFrom(t, resp)}, "code_verifier": {verifier}, "client_id": {id}, "redirect_uri": {testRedirect}})
			if status != http.StatusOK {
				t.Fatalf("token: %d %v", status, tok)
			}
		})
	}
}
