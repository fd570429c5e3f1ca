package clientreg

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// regBody returns a registration request body: a valid one with fields
// set, or with a field removed when its value is nil.
func regBody(t *testing.T, fields map[string]any) []byte {
	t.Helper()
	body := map[string]any{"redirect_uris": []string{"https://app.example.com/cb"}}
	for k, v := range fields {
		if v == nil {
			delete(body, k)
			continue
		}
		body[k] = v
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestValidateRegistrationDefaults(t *testing.T) {
	m, err := ValidateRegistration(regBody(t, map[string]any{
		"client_id":          "https://attacker.example/client.json",
		"client_name":        "Example App",
		"software_statement": "eyJhbGciOiJub25lIn0.e30.",
		"unknown_field":      map[string]any{"x": 1},
	}), RegistrationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := &Metadata{
		ClientName:              "Example App",
		RedirectURIs:            []string{"https://app.example.com/cb"},
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		TokenEndpointAuthMethod: "none",
	}
	got, _ := json.Marshal(m)
	wantJSON, _ := json.Marshal(want)
	if string(got) != string(wantJSON) {
		t.Errorf("metadata\n got %s\nwant %s", got, wantJSON)
	}
}

func TestValidateRegistration(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	tooManyURIs := make([]string, DefaultMaxRedirectURIs+1)
	for i := range tooManyURIs {
		tooManyURIs[i] = fmt.Sprintf("https://app.example.com/cb%d", i)
	}
	tests := []struct {
		name     string
		body     []byte
		fields   map[string]any
		opts     RegistrationOptions
		wantCode string // "" means accepted
		wantDesc string // a part of the description
	}{
		{name: "minimal"},
		{name: "body over the default cap", fields: map[string]any{"client_name": long(DefaultRegistrationMaxBodyBytes)}, wantCode: CodeInvalidClientMetadata, wantDesc: "larger than"},
		{name: "body over a configured cap", fields: map[string]any{"client_name": long(100)}, opts: RegistrationOptions{MaxBodyBytes: 100}, wantCode: CodeInvalidClientMetadata, wantDesc: "larger than 100 bytes"},
		{name: "a JSON array", body: []byte(`[{"redirect_uris":["https://a.example/cb"]}]`), wantCode: CodeInvalidClientMetadata, wantDesc: "JSON object"},
		{name: "a JSON string", body: []byte(`"x"`), wantCode: CodeInvalidClientMetadata, wantDesc: "JSON object"},
		{name: "JSON null", body: []byte(`null`), wantCode: CodeInvalidClientMetadata, wantDesc: "JSON object"},
		{name: "empty body", body: []byte(``), wantCode: CodeInvalidClientMetadata, wantDesc: "JSON object"},
		{name: "invalid JSON", body: []byte(`{"redirect_uris":`), wantCode: CodeInvalidClientMetadata, wantDesc: "not valid JSON"},
		{name: "trailing data", body: []byte(`{"redirect_uris":["https://a.example/cb"]} {}`), wantCode: CodeInvalidClientMetadata, wantDesc: "not valid JSON"},
		{name: "redirect_uris a string", fields: map[string]any{"redirect_uris": "https://a.example/cb"}, wantCode: CodeInvalidRedirectURI, wantDesc: "array of strings"},
		{name: "redirect_uris holding a number", fields: map[string]any{"redirect_uris": []any{1}}, wantCode: CodeInvalidRedirectURI, wantDesc: "array of strings"},
		{name: "grant_types a number", fields: map[string]any{"grant_types": 1}, wantCode: CodeInvalidClientMetadata, wantDesc: "grant_types has the wrong type"},
		{name: "no redirect_uris", fields: map[string]any{"redirect_uris": nil}, wantCode: CodeInvalidRedirectURI, wantDesc: "required"},
		{name: "empty redirect_uris", fields: map[string]any{"redirect_uris": []string{}}, wantCode: CodeInvalidRedirectURI, wantDesc: "required"},
		{name: "too many redirect_uris", fields: map[string]any{"redirect_uris": tooManyURIs}, wantCode: CodeInvalidRedirectURI, wantDesc: "more than the 10 allowed"},
		{name: "as many redirect_uris as allowed", fields: map[string]any{"redirect_uris": tooManyURIs[:DefaultMaxRedirectURIs]}},
		{name: "more redirect_uris than configured", fields: map[string]any{"redirect_uris": tooManyURIs[:3]}, opts: RegistrationOptions{MaxRedirectURIs: 2}, wantCode: CodeInvalidRedirectURI, wantDesc: "more than the 2 allowed"},

		{name: "redirect: https with a port and query", fields: uris("https://app.example.com:8443/cb?x=1")},
		{name: "redirect: http on 127.0.0.1", fields: uris("http://127.0.0.1/cb")},
		{name: "redirect: http on 127.0.0.1 with a port", fields: uris("http://127.0.0.1:8080/cb")},
		{name: "redirect: http on [::1]", fields: uris("http://[::1]:8080/cb")},
		{name: "redirect: http on localhost", fields: uris("http://localhost:8080/cb")},
		{name: "redirect: private-use scheme, one slash", fields: uris("com.example.app:/oauth2redirect")},
		{name: "redirect: private-use scheme, two slashes", fields: uris("com.example.app://oauth2redirect")},
		{name: "redirect: relative", fields: uris("/cb"), wantCode: CodeInvalidRedirectURI, wantDesc: "absolute"},
		{name: "redirect: scheme-relative", fields: uris("//app.example.com/cb"), wantCode: CodeInvalidRedirectURI, wantDesc: "absolute"},
		{name: "redirect: a fragment", fields: uris("https://app.example.com/cb#x"), wantCode: CodeInvalidRedirectURI, wantDesc: "fragment"},
		{name: "redirect: an empty fragment", fields: uris("https://app.example.com/cb#"), wantCode: CodeInvalidRedirectURI, wantDesc: "fragment"},
		{name: "redirect: user info", fields: uris("https://user@app.example.com/cb"), wantCode: CodeInvalidRedirectURI, wantDesc: "user info"},
		{name: "redirect: loopback http with user info", fields: uris("http://user@127.0.0.1/cb"), wantCode: CodeInvalidRedirectURI, wantDesc: "user info"},
		{name: "redirect: https without a host", fields: uris("https:///cb"), wantCode: CodeInvalidRedirectURI, wantDesc: "host"},
		{name: "redirect: https, port only", fields: uris("https://:443/cb"), wantCode: CodeInvalidRedirectURI, wantDesc: "host"},
		{name: "redirect: http on a public host", fields: uris("http://app.example.com/cb"), wantCode: CodeInvalidRedirectURI, wantDesc: "loopback"},
		{name: "redirect: http on a name starting with localhost", fields: uris("http://localhost.evil.example/cb"), wantCode: CodeInvalidRedirectURI, wantDesc: "loopback"},
		{name: "redirect: http on a name resolving to loopback", fields: uris("http://127.0.0.1.nip.io/cb"), wantCode: CodeInvalidRedirectURI, wantDesc: "loopback"},
		{name: "redirect: http on a private address", fields: uris("http://10.0.0.1/cb"), wantCode: CodeInvalidRedirectURI, wantDesc: "loopback"},
		{name: "redirect: http loopback with a port out of range", fields: uris("http://127.0.0.1:65536/cb"), wantCode: CodeInvalidRedirectURI},
		{name: "redirect: javascript", fields: uris("javascript:alert(1)"), wantCode: CodeInvalidRedirectURI, wantDesc: "javascript: scheme is never allowed"},
		{name: "redirect: javascript in capitals", fields: uris("JavaScript:alert(1)"), wantCode: CodeInvalidRedirectURI, wantDesc: "javascript: scheme is never allowed"},
		{name: "redirect: data", fields: uris("data:text/html,<script>alert(1)</script>"), wantCode: CodeInvalidRedirectURI, wantDesc: "data: scheme is never allowed"},
		{name: "redirect: file", fields: uris("file:///etc/passwd"), wantCode: CodeInvalidRedirectURI, wantDesc: "file: scheme is never allowed"},
		{name: "redirect: vbscript", fields: uris("vbscript:msgbox"), wantCode: CodeInvalidRedirectURI, wantDesc: "never allowed"},
		{name: "redirect: a scheme without a dot", fields: uris("myapp:/cb"), wantCode: CodeInvalidRedirectURI, wantDesc: "reverse-domain"},
		{name: "redirect: ftp", fields: uris("ftp://app.example.com/cb"), wantCode: CodeInvalidRedirectURI, wantDesc: "reverse-domain"},
		{name: "redirect: a scheme ending in a dot", fields: uris("com.example.:/cb"), wantCode: CodeInvalidRedirectURI, wantDesc: "reverse-domain"},
		{name: "redirect: a scheme with an empty label", fields: uris("com..app:/cb"), wantCode: CodeInvalidRedirectURI, wantDesc: "reverse-domain"},
		{name: "redirect: private-use scheme without a path", fields: uris("com.example.app:"), wantCode: CodeInvalidRedirectURI, wantDesc: "needs a path"},
		{name: "redirect: not a URI", fields: uris("https://app.example.com/%zz"), wantCode: CodeInvalidRedirectURI, wantDesc: "not a valid URI"},
		{name: "redirect: too long", fields: uris("https://app.example.com/" + long(maxURILength)), wantCode: CodeInvalidRedirectURI, wantDesc: "longer than"},
		{name: "redirect: the second one is bad", fields: uris("https://app.example.com/cb", "javascript:x"), wantCode: CodeInvalidRedirectURI, wantDesc: "redirect_uris[1]"},

		{name: "grant_types authorization_code only", fields: map[string]any{"grant_types": []string{"authorization_code"}}},
		{name: "grant_types implicit", fields: map[string]any{"grant_types": []string{"authorization_code", "implicit"}}, wantCode: CodeInvalidClientMetadata, wantDesc: `"implicit" is not supported`},
		{name: "grant_types client_credentials", fields: map[string]any{"grant_types": []string{"client_credentials"}}, wantCode: CodeInvalidClientMetadata, wantDesc: "grant_types"},
		{name: "grant_types without authorization_code", fields: map[string]any{"grant_types": []string{"refresh_token"}}, wantCode: CodeInvalidClientMetadata, wantDesc: "must include authorization_code"},
		{name: "response_types code", fields: map[string]any{"response_types": []string{"code"}}},
		{name: "response_types token", fields: map[string]any{"response_types": []string{"token"}}, wantCode: CodeInvalidClientMetadata, wantDesc: "response_types"},
		{name: "response_types code and token", fields: map[string]any{"response_types": []string{"code", "code token"}}, wantCode: CodeInvalidClientMetadata, wantDesc: "response_types"},
		{name: "auth method client_secret_basic", fields: map[string]any{"token_endpoint_auth_method": "client_secret_basic"}},
		{name: "auth method client_secret_post", fields: map[string]any{"token_endpoint_auth_method": "client_secret_post"}},
		{name: "auth method none", fields: map[string]any{"token_endpoint_auth_method": "none"}},
		{name: "auth method private_key_jwt", fields: map[string]any{"token_endpoint_auth_method": "private_key_jwt"}, wantCode: CodeInvalidClientMetadata, wantDesc: "token_endpoint_auth_method"},
		{name: "auth method client_secret_jwt", fields: map[string]any{"token_endpoint_auth_method": "client_secret_jwt"}, wantCode: CodeInvalidClientMetadata, wantDesc: "token_endpoint_auth_method"},

		{name: "client_name at the limit", fields: map[string]any{"client_name": long(maxNameLength)}},
		{name: "client_name too long", fields: map[string]any{"client_name": long(maxNameLength + 1)}, wantCode: CodeInvalidClientMetadata, wantDesc: "client_name is longer than 256 bytes"},
		{name: "client_name with a control character", fields: map[string]any{"client_name": "App\u0007"}, wantCode: CodeInvalidClientMetadata, wantDesc: "client_name must not hold control"},
		{name: "client_name with a newline", fields: map[string]any{"client_name": "App\nClick here"}, wantCode: CodeInvalidClientMetadata, wantDesc: "client_name must not hold control"},
		{name: "client_name with a bidi override", fields: map[string]any{"client_name": "App\u202egnp.exe"}, wantCode: CodeInvalidClientMetadata, wantDesc: "client_name must not hold control"},
		{name: "client_name not UTF-8 is decoded as U+FFFD", body: []byte("{\"redirect_uris\":[\"https://a.example/cb\"],\"client_name\":\"\xff\"}")},
		{name: "client_name in another script", fields: map[string]any{"client_name": "Приложение 应用"}},
		{name: "software_id too long", fields: map[string]any{"software_id": long(maxNameLength + 1)}, wantCode: CodeInvalidClientMetadata, wantDesc: "software_id"},
		{name: "software_version too long", fields: map[string]any{"software_version": long(maxNameLength + 1)}, wantCode: CodeInvalidClientMetadata, wantDesc: "software_version"},
		{name: "client_uri https", fields: map[string]any{"client_uri": "https://app.example.com/"}},
		{name: "client_uri http", fields: map[string]any{"client_uri": "http://app.example.com/"}, wantCode: CodeInvalidClientMetadata, wantDesc: "client_uri must be an https URL"},
		{name: "client_uri javascript", fields: map[string]any{"client_uri": "javascript:alert(1)"}, wantCode: CodeInvalidClientMetadata, wantDesc: "client_uri must be an https URL"},
		{name: "client_uri relative", fields: map[string]any{"client_uri": "/home"}, wantCode: CodeInvalidClientMetadata, wantDesc: "client_uri"},
		{name: "client_uri with user info", fields: map[string]any{"client_uri": "https://u@app.example.com/"}, wantCode: CodeInvalidClientMetadata, wantDesc: "user info"},
		{name: "client_uri too long", fields: map[string]any{"client_uri": "https://app.example.com/" + long(maxURILength)}, wantCode: CodeInvalidClientMetadata, wantDesc: "client_uri is longer"},
		{name: "logo_uri https", fields: map[string]any{"logo_uri": "https://app.example.com/logo.png"}},
		{name: "logo_uri http", fields: map[string]any{"logo_uri": "http://app.example.com/logo.png"}, wantCode: CodeInvalidClientMetadata, wantDesc: "logo_uri must be an https URL"},
		{name: "logo_uri data", fields: map[string]any{"logo_uri": "data:image/png;base64,AAAA"}, wantCode: CodeInvalidClientMetadata, wantDesc: "logo_uri"},
		{name: "scope", fields: map[string]any{"scope": "mcp:tools files:read"}},
		{name: "scope with a double space", fields: map[string]any{"scope": "a  b"}, wantCode: CodeInvalidClientMetadata, wantDesc: "scope"},
		{name: "scope with a leading space", fields: map[string]any{"scope": " a"}, wantCode: CodeInvalidClientMetadata, wantDesc: "scope"},
		{name: "scope with a quote", fields: map[string]any{"scope": `a"b`}, wantCode: CodeInvalidClientMetadata, wantDesc: "scope"},
		{name: "scope with a backslash", fields: map[string]any{"scope": `a\b`}, wantCode: CodeInvalidClientMetadata, wantDesc: "scope"},
		{name: "scope with a non-ASCII letter", fields: map[string]any{"scope": "é"}, wantCode: CodeInvalidClientMetadata, wantDesc: "scope"},
		{name: "scope too long", fields: map[string]any{"scope": long(maxScopeLength + 1)}, wantCode: CodeInvalidClientMetadata, wantDesc: "scope is longer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body
			if body == nil {
				body = regBody(t, tt.fields)
			}
			m, err := ValidateRegistration(body, tt.opts)
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if m == nil || len(m.RedirectURIs) == 0 {
					t.Fatalf("accepted without metadata: %+v", m)
				}
				return
			}
			var rerr *RegistrationError
			if !errors.As(err, &rerr) {
				t.Fatalf("err = %v, want a *RegistrationError %s", err, tt.wantCode)
			}
			if m != nil {
				t.Errorf("refused, yet metadata returned: %+v", m)
			}
			if rerr.Code != tt.wantCode || !strings.Contains(rerr.Description, tt.wantDesc) {
				t.Errorf("got %s %q, want %s with %q", rerr.Code, rerr.Description, tt.wantCode, tt.wantDesc)
			}
			if r := rerr.Response(); r.Error != rerr.Code || r.Description != rerr.Description {
				t.Errorf("Response() = %+v", r)
			}
		})
	}
}

func uris(u ...string) map[string]any { return map[string]any{"redirect_uris": u} }

func TestErrorResponseJSON(t *testing.T) {
	b, err := json.Marshal((&RegistrationError{Code: CodeInvalidRedirectURI, Description: "bad"}).Response())
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"error":"invalid_redirect_uri","error_description":"bad"}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
	b, _ = json.Marshal(ErrorResponse{Error: CodeInvalidClientMetadata})
	if want := `{"error":"invalid_client_metadata"}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

func TestValidateRegistrationKeepsWhatItWasGiven(t *testing.T) {
	m, err := ValidateRegistration(regBody(t, map[string]any{
		"client_name":                "App",
		"client_uri":                 "https://app.example.com/",
		"logo_uri":                   "https://app.example.com/logo.png",
		"grant_types":                []string{"authorization_code"},
		"token_endpoint_auth_method": "client_secret_post",
		"scope":                      "a b",
		"software_id":                "id-1",
		"software_version":           "1.2.3",
	}), RegistrationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.ClientName != "App" || m.ClientURI != "https://app.example.com/" || m.LogoURI != "https://app.example.com/logo.png" ||
		!slices.Equal(m.GrantTypes, []string{"authorization_code"}) || m.TokenEndpointAuthMethod != "client_secret_post" ||
		m.Scope != "a b" || m.SoftwareID != "id-1" || m.SoftwareVersion != "1.2.3" {
		t.Errorf("metadata = %+v", m)
	}
}
