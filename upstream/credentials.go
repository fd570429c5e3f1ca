package upstream

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/portcullis-mcp/portcullis/internal/tokenexchange"
)

// CredentialTransport returns next wrapped so that every request carries
// the credential of an HTTP service Portcullis calls: the headers (their
// value files read now) and, with an oauth block of grant
// client_credentials, Portcullis's own bearer token from o.TokenURL,
// requested with client and cached and renewed by the returned transport.
// name names the service in errors. It is how an http upstream's shared
// session and a declared HTTP tool's API are sent their credential.
func CredentialTransport(name string, headers []NamedValue, o OAuthOptions, client *http.Client, next http.RoundTripper) (http.RoundTripper, error) {
	return credentialTransport(name, headers, o, client, next, nil)
}

// credentialTransport is [CredentialTransport], with src, when set,
// giving a caller's exchanged token instead of the client-credentials one.
func credentialTransport(name string, headers []NamedValue, o OAuthOptions, client *http.Client, next http.RoundTripper, src *tokenexchange.Source) (http.RoundTripper, error) {
	set := make(http.Header)
	for _, h := range headers {
		v, err := h.value()
		if err != nil {
			return nil, fmt.Errorf("upstream: %s: header %s: %w", name, h.Name, err)
		}
		set.Set(h.Name, v)
	}
	var rt http.RoundTripper = &headerTransport{next: next, headers: set}
	if src != nil {
		return &tokenexchange.Transport{Source: src, Base: rt}, nil
	}
	if !o.clientCredentials() {
		return rt, nil
	}
	secret, err := readValueFile(o.ClientSecretFile)
	if err != nil {
		return nil, fmt.Errorf("upstream: %s: oauth.client_secret_file: %w", name, err)
	}
	cc := &clientcredentials.Config{ClientID: o.ClientID, ClientSecret: secret, TokenURL: o.TokenURL, Scopes: o.Scopes}
	if o.Resource != "" {
		cc.EndpointParams = url.Values{"resource": {o.Resource}}
	}
	if o.Audience != "" && o.Grant != GrantIDJAG {
		if cc.EndpointParams == nil {
			cc.EndpointParams = url.Values{}
		}
		cc.EndpointParams.Set("audience", o.Audience)
	}
	// The token source caches the token and renews it when it expires,
	// for this transport; a new transport reads the secret file again, so
	// a rotated secret is picked up.
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, client)
	return &oauth2.Transport{Source: cc.TokenSource(ctx), Base: rt}, nil
}

// CheckCredentials reports the problems of the credential of an HTTP
// service Portcullis calls with [CredentialTransport]: its headers, and
// an oauth block, which only grant client_credentials may set. Each
// error's text starts with its key ("headers[0].name: …"); the caller
// prefixes where the block is.
func CheckCredentials(headers []NamedValue, o OAuthOptions) []error {
	var errs []error
	at := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	for k, h := range headers {
		errs = append(errs, checkNamedValue(fmt.Sprintf("headers[%d]", k), h, validHeaderName)...)
		if strings.EqualFold(h.Name, "Authorization") && o.set() {
			at(fmt.Sprintf("headers[%d].name", k), "Authorization comes from oauth; set one or the other")
		}
	}
	if !o.set() {
		return errs
	}
	if o.Grant != "" && o.Grant != GrantClientCredentials {
		at("oauth.grant", "%q is not supported here: only client_credentials", o.Grant)
		return errs
	}
	if err := checkURL(o.TokenURL); err != nil {
		at("oauth.token_url", "%v", err)
	}
	if o.ClientID == "" {
		at("oauth.client_id", "required with oauth.token_url")
	}
	if o.ClientSecretFile == "" {
		at("oauth.client_secret_file", "required with oauth.token_url")
	} else if _, err := readValueFile(o.ClientSecretFile); err != nil {
		at("oauth.client_secret_file", "%v", err)
	}
	if o.Resource != "" {
		if err := checkURL(o.Resource); err != nil {
			at("oauth.resource", "%v", err)
		}
	}
	if o.RequestedTokenType != "" || o.Issuer != "" || o.AuthorizationURL != "" || o.ConnectAtSignIn || o.IdentityProvider.set() || o.TokenEnv != "" || o.TokenFileEnv != "" {
		at("oauth.grant", "client_credentials takes token_url, client_id, client_secret_file, scopes, resource and audience only")
	}
	return errs
}
