package clientreg_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/portcullis-mcp/portcullis/internal/clientreg"
)

// A registration endpoint validates the request and answers an RFC 7591
// error with status 400.
func ExampleValidateRegistration() {
	register := func(w http.ResponseWriter, body []byte) {
		m, err := clientreg.ValidateRegistration(body, clientreg.RegistrationOptions{})
		var rerr *clientreg.RegistrationError
		if errors.As(err, &rerr) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(rerr.Response())
			return
		}
		// Assign a client_id, store m, answer 201 with it.
		fmt.Fprintln(w, m.RedirectURIs, m.GrantTypes, m.TokenEndpointAuthMethod)
	}

	w := httptest.NewRecorder()
	register(w, []byte(`{"redirect_uris":["http://127.0.0.1/callback"],"client_name":"Example"}`))
	fmt.Print(w.Code, " ", w.Body)
	w = httptest.NewRecorder()
	register(w, []byte(`{"redirect_uris":["javascript:alert(1)"]}`))
	fmt.Print(w.Code, " ", w.Body)
	// Output:
	// 200 [http://127.0.0.1/callback] [authorization_code refresh_token] none
	// 400 {"error":"invalid_redirect_uri","error_description":"redirect_uris[0]: the javascript: scheme is never allowed"}
}

// An authorization endpoint gets the metadata of a client whose client_id
// is a URL, then checks the redirect URI against it.
func ExampleFetcher_Get() {
	f := clientreg.NewFetcher(clientreg.FetchOptions{}, clientreg.FetchDeps{})
	authorize := func(ctx context.Context, clientID, redirectURI string) error {
		if !clientreg.IsURLClientID(clientID, false) {
			return errors.New("look the client up among the registered ones")
		}
		m, err := f.Get(ctx, clientID)
		if err != nil {
			return err // invalid_client; the error says why, for the log
		}
		if !m.MatchRedirectURI(redirectURI) {
			return errors.New("the redirect URI is not registered: show an error page, never redirect")
		}
		return nil
	}
	// The fetcher refuses addresses of the local network, such as the
	// cloud metadata service.
	err := authorize(context.Background(), "https://169.254.169.254/latest/client.json", "https://app.example.com/cb")
	fmt.Println(errors.Is(err, clientreg.ErrFetch), strings.Contains(err.Error(), "not a public address"))
	// Output: true true
}
