package httptools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/httptools/spec"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// A path argument fills one segment whatever it holds: it never climbs
// out of the tool's path, nor changes the host.
func TestAttackPathArgument(t *testing.T) {
	tests := []struct {
		name, petID string
		wantPath    string // empty: refused before any request
	}{
		{name: "dot dot slash", petID: "../admin", wantPath: "/v1/pets/..%2Fadmin"},
		{name: "dot dot", petID: ".."},
		{name: "dot", petID: "."},
		{name: "empty", petID: ""},
		{name: "slash", petID: "a/b", wantPath: "/v1/pets/a%2Fb"},
		{name: "encoded slash", petID: "%2F..%2Fadmin", wantPath: "/v1/pets/%252F..%252Fadmin"},
		{name: "full URL", petID: "http://evil.example/x", wantPath: "/v1/pets/http:%2F%2Fevil.example%2Fx"},
		{name: "query and fragment", petID: "1?admin=1#x", wantPath: "/v1/pets/1%3Fadmin=1%23x"},
		{name: "backslash", petID: `..\admin`, wantPath: "/v1/pets/..%5Cadmin"},
	}
	api := newTestAPI(t, nil)
	tools := register(t, petsAPI(api.srv.URL))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := api.count()
			args, _ := json.Marshal(map[string]string{"petId": tt.petID})
			res := tools["get_pet"](string(args))
			if tt.wantPath == "" {
				if !res.IsError || api.count() != before {
					t.Fatalf("IsError = %v, requests %d; want refused before any request: %s", res.IsError, api.count()-before, text(res))
				}
				return
			}
			if res.IsError {
				t.Fatalf("tool error: %s", text(res))
			}
			if got := api.last(t); got.rawPath != tt.wantPath || got.rawQuery != "" {
				t.Errorf("path = %s ?%s, want %s", got.rawPath, got.rawQuery, tt.wantPath)
			}
		})
	}
}

// A header argument cannot add a header or split the request.
func TestAttackHeaderArgument(t *testing.T) {
	api := newTestAPI(t, nil)
	tools := register(t, petsAPI(api.srv.URL))
	for _, v := range []string{"a\r\nX-Admin: 1", "a\nb", "a\rb", "a\x00b", "a\x7fb"} {
		args, _ := json.Marshal(map[string]string{"petId": "1", "trace": v})
		if res := tools["get_pet"](string(args)); !res.IsError || !strings.Contains(text(res), "header value") {
			t.Errorf("trace %q: IsError = %v: %s", v, res.IsError, text(res))
		}
	}
	if api.count() != 0 {
		t.Errorf("the API got %d requests, want none", api.count())
	}
}

// No argument sets a header the configuration sets, nor the
// Authorization header: one named like it goes where unmapped arguments
// go, and a param that would set one is refused at load.
func TestAttackArgumentNamedLikeAFixedHeader(t *testing.T) {
	api := newTestAPI(t, nil)
	tools := register(t, petsAPI(api.srv.URL))
	res := tools["add_pet"](`{"Authorization":"Bearer caller","X-Api-Key":"mine"}`)
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	got := api.last(t)
	if got.header.Get("Authorization") != "" || got.header.Get("X-Api-Key") != "s3cret-key" {
		t.Errorf("headers Authorization %q, X-Api-Key %q: an argument set a credential header", got.header.Get("Authorization"), got.header.Get("X-Api-Key"))
	}
	if res := tools["get_pet"](`{"petId":"1","X-Api-Key":"mine"}`); !res.IsError {
		t.Errorf("a tool without a body took an unmapped argument")
	}
	for _, h := range []string{"Authorization", "x-api-key", "Host", "Content-Length", "Cookie"} {
		o := petsAPI("http://api.example")
		o.Tools[0].Params = append(o.Tools[0].Params, spec.Param{Name: "h", In: spec.InHeader, As: h})
		list := []Options{o}
		if err := Validate(list, nil, nil); err == nil || !strings.Contains(err.Error(), "no argument may set it") {
			t.Errorf("a header param as %s: Validate = %v", h, err)
		}
	}
}

// Redirects go only to the allowed hosts, and never to a private address
// unless allowed.
func TestAttackRedirect(t *testing.T) {
	other := newTestAPI(t, nil)
	api := newTestAPI(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.srv.URL+"/steal", http.StatusFound)
	})
	o := petsAPI(api.srv.URL)
	o.AllowHosts = []string{strings.TrimPrefix(api.srv.URL, "http://")}
	res := register(t, o)["get_pet"](`{"petId":"1"}`)
	if !res.IsError || !strings.Contains(text(res), "redirected") {
		t.Errorf("redirect to another host: IsError = %v: %s", res.IsError, text(res))
	}
	if other.count() != 0 {
		t.Errorf("the other host got %d requests", other.count())
	}

	// A public API that redirects to a loopback address it allow-lists:
	// the dial check refuses it. The API's host is answered without a
	// dial, so that only the redirect's connection meets the check.
	o = petsAPI("http://public.example")
	o.AllowPrivateAddresses = false
	o.AllowHosts = []string{"public.example", strings.TrimPrefix(other.srv.URL, "http://")}
	list := []Options{o}
	list[0].Defaults()
	cat := &fakeCatalog{}
	err := Register(context.Background(), list, cat, Deps{Transport: func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Host == "public.example" {
				return &http.Response{StatusCode: http.StatusFound, Header: http.Header{"Location": {other.srv.URL + "/steal"}}, Body: http.NoBody, Request: r}, nil
			}
			return next.RoundTrip(r)
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := cat.sets["http_api pets"].Tools[0].Handler
	res, _ = h(t.Context(), &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Arguments: json.RawMessage(`{"petId":"1"}`)}})
	if !res.IsError || !strings.Contains(text(res), "could not be reached") {
		t.Errorf("redirect to a private address: IsError = %v: %s", res.IsError, text(res))
	}
	if other.count() != 0 {
		t.Errorf("the private address got %d requests", other.count())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A loopback API is refused unless allow_private_addresses is on.
func TestAttackPrivateAddress(t *testing.T) {
	api := newTestAPI(t, nil)
	o := petsAPI(api.srv.URL)
	o.AllowPrivateAddresses = false
	res := register(t, o)["get_pet"](`{"petId":"1"}`)
	if !res.IsError || api.count() != 0 {
		t.Errorf("IsError = %v, requests %d: %s", res.IsError, api.count(), text(res))
	}
}

// A body over max_response_bytes, or one that never ends, ends the call
// with a tool error.
func TestAttackResponseBody(t *testing.T) {
	big := newTestAPI(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 4096))
	})
	o := petsAPI(big.srv.URL)
	o.MaxResponseBytes = 1000
	res := register(t, o)["get_pet"](`{"petId":"1"}`)
	if !res.IsError || !strings.Contains(text(res), "over 1000 bytes") {
		t.Errorf("oversized: IsError = %v: %s", res.IsError, text(res))
	}

	endless := newTestAPI(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		for r.Context().Err() == nil {
			if _, err := io.WriteString(w, "x"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	o = petsAPI(endless.srv.URL)
	o.MaxResponseBytes = 1 << 40
	o.Tools[0].Timeout = 300 * time.Millisecond
	start := time.Now()
	res = register(t, o)["get_pet"](`{"petId":"1"}`)
	if !res.IsError || !strings.Contains(text(res), "did not answer") {
		t.Errorf("never-ending: IsError = %v: %.200s", res.IsError, text(res))
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the call took %s", d)
	}
}

// An error body that echoes the credential shows it redacted.
func TestAttackCredentialEcho(t *testing.T) {
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte("file-secret-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	api := newTestAPI(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "bad key %s", r.Header.Get("X-Api-Key"))
	})
	o := petsAPI(api.srv.URL)
	o.Headers = []upstream.NamedValue{{Name: "X-Api-Key", ValueFile: file}}
	res := register(t, o)["get_pet"](`{"petId":"1"}`)
	if !res.IsError || strings.Contains(text(res), "file-secret-123") || !strings.Contains(text(res), "[redacted]") {
		t.Errorf("IsError = %v: %s", res.IsError, text(res))
	}
}
