package httptools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/upstream"
)

// An API whose token is got for each caller is sent the token exchanged
// for that caller's token, never the caller's own; a call without a
// caller's token, or one the token endpoint refuses, is a tool error
// before any request to the API.
func TestPerCallerToken(t *testing.T) {
	var exchanges atomic.Int32
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		exchanges.Add(1)
		if id, secret, _ := r.BasicAuth(); id != "portcullis" || secret != "client-secret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		sub := r.PostFormValue("subject_token")
		w.Header().Set("Content-Type", "application/json")
		if sub == "refused-token" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"access_token": "api-token-for-" + sub, "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
			"token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(idp.Close)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("client-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	api := newTestAPI(t, nil)
	o := petsAPI(api.srv.URL)
	o.OAuth = upstream.OAuthOptions{Grant: upstream.GrantTokenExchange, TokenURL: idp.URL, ClientID: "portcullis", ClientSecretFile: secret}
	list := []Options{o}
	list[0].Defaults()
	if err := Validate(list, nil, nil); err != nil {
		t.Fatal(err)
	}
	cat := &fakeCatalog{}
	deps := Deps{
		SubjectToken: func(ti *sdkauth.TokenInfo, want string) (string, string, bool) {
			tok, _ := ti.Extra["token"].(string)
			return tok, want, tok != ""
		},
		PrincipalKey: func(ti *sdkauth.TokenInfo) string { return ti.UserID },
	}
	if err := Register(context.Background(), list, cat, deps); err != nil {
		t.Fatal(err)
	}
	h := cat.sets["http_api pets"].Tools[0].Handler
	call := func(user, token string) *sdk.CallToolResult {
		t.Helper()
		extra := &sdk.RequestExtra{}
		if user != "" {
			extra.TokenInfo = &sdkauth.TokenInfo{UserID: user, Extra: map[string]any{"token": token}}
		}
		res, err := h(t.Context(), &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Arguments: json.RawMessage(`{"petId":"1"}`)}, Extra: extra})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, c := range []struct{ user, token string }{{"alice", "alice-token"}, {"bob", "bob-token"}, {"alice", "alice-token"}} {
		if res := call(c.user, c.token); res.IsError {
			t.Fatalf("%s: %s", c.user, text(res))
		}
		if got, want := api.last(t).header.Get("Authorization"), "Bearer api-token-for-"+c.token; got != want {
			t.Errorf("%s: the API got Authorization %q, want %q", c.user, got, want)
		}
	}
	if n := exchanges.Load(); n != 2 {
		t.Errorf("%d exchanges, want 2 (alice's token is cached)", n)
	}
	before := api.count()
	if res := call("", ""); !res.IsError || !strings.Contains(text(res), "no caller's token") {
		t.Errorf("without a caller's token: %s", text(res))
	}
	if res := call("carol", "refused-token"); !res.IsError || !strings.Contains(text(res), "invalid_grant") || strings.Contains(text(res), "refused-token") {
		t.Errorf("a refused exchange: %s", text(res))
	}
	if api.count() != before {
		t.Errorf("the API got %d requests without a token of its own", api.count()-before)
	}
}
