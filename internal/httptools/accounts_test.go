package httptools

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/upstream"
)

// fakeAccounts gives alice a connected account at every API, and asks
// anyone else to connect one.
type fakeAccounts struct {
	mu       sync.Mutex
	token    string
	rejected []string
}

func (f *fakeAccounts) Token(_ context.Context, ti *sdkauth.TokenInfo, api string) (string, error) {
	if ti == nil || ti.UserID != "alice" {
		return "", &upstream.ConnectRequired{Upstream: api, URL: "https://portcullis.example/connections/" + api}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.token, nil
}

func (f *fakeAccounts) Rejected(_ context.Context, _ *sdkauth.TokenInfo, _, token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rejected = append(f.rejected, token)
}

// An API with oauth.grant authorization_code is sent the caller's
// connected account; a caller without one is told where to connect it,
// before any request; a token the API refuses is reported rejected and
// not shown.
func TestConnectedAccount(t *testing.T) {
	api := newTestAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer alice-account" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte("bad token " + r.Header.Get("Authorization")))
			return
		}
		w.Write([]byte(`{"ok":true}`))
	})
	o := petsAPI(api.srv.URL)
	o.OAuth = upstream.OAuthOptions{Grant: upstream.GrantAuthorizationCode, Issuer: "https://as.example", ClientID: "portcullis"}
	list := []Options{o}
	list[0].Defaults()
	if err := Validate(list, nil, nil); err != nil {
		t.Fatal(err)
	}
	accts := &fakeAccounts{token: "alice-account"}
	cat := &fakeCatalog{}
	if err := Register(context.Background(), list, cat, Deps{Accounts: accts}); err != nil {
		t.Fatal(err)
	}
	h := cat.sets["http_api pets"].Tools[0].Handler
	call := func(user string) *sdk.CallToolResult {
		t.Helper()
		res, err := h(t.Context(), &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Arguments: json.RawMessage(`{"petId":"1"}`)},
			Extra: &sdk.RequestExtra{TokenInfo: &sdkauth.TokenInfo{UserID: user}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := call("alice"); res.IsError {
		t.Fatalf("alice: %s", text(res))
	}
	if res := call("bob"); !res.IsError || !strings.Contains(text(res), "https://portcullis.example/connections/pets") {
		t.Errorf("bob: %s", text(res))
	}
	if api.count() != 1 {
		t.Errorf("the API got %d requests, want alice's alone", api.count())
	}
	accts.token = "stale-account"
	res := call("alice")
	if !res.IsError || !strings.Contains(text(res), "401") || strings.Contains(text(res), "stale-account") {
		t.Errorf("a refused account: %s", text(res))
	}
	if len(accts.rejected) != 1 || accts.rejected[0] != "stale-account" {
		t.Errorf("rejected %q, want the stale token", accts.rejected)
	}
	if err := Register(context.Background(), list, &fakeCatalog{}, Deps{}); err == nil {
		t.Error("Register without Accounts succeeded")
	}
}
