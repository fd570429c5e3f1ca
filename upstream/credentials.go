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
// service Portcullis calls with [CredentialTransport] or, for a grant
// that gets a token for each caller, [NewCallerTransport]: its headers,
// and its oauth block after [OAuthOptions.Defaults]. With grant
// authorization_code, whose token (each caller's connected account, from
// [Accounts]) the code that calls the service adds to each request,
// connect_at_sign_in is refused. Each error's text starts with its key
// ("headers[0].name: …"); the caller prefixes where the block is.
func CheckCredentials(headers []NamedValue, o OAuthOptions) []error {
	var errs []error
	at := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	for k, h := range headers {
		errs = append(errs, checkNamedValue(fmt.Sprintf("headers[%d]", k), h, validHeaderName)...)
		if strings.EqualFold(h.Name, "Authorization") && o.enabled() {
			at(fmt.Sprintf("headers[%d].name", k), "Authorization comes from oauth; set one or the other")
		}
	}
	switch {
	case o.account():
		o.checkAccount(at)
		if o.ConnectAtSignIn {
			at("oauth.connect_at_sign_in", "applies only to upstreams")
		}
		if o.TokenEnv != "" || o.TokenFileEnv != "" {
			at("oauth.token_env", "token_env and token_file_env apply only to stdio upstreams")
		}
	case o.enabled():
		o.checkGrant(at)
		if o.TokenEnv != "" || o.TokenFileEnv != "" {
			at("oauth.token_env", "token_env and token_file_env apply only to stdio upstreams")
		}
	case o.set():
		at("oauth.token_url", "required when other oauth keys are set")
	}
	return errs
}

// Defaults fills the zero values of the oauth block of an HTTP service at
// url: grant client_credentials when token_url is set; with
// token_exchange, requested_token_type
// urn:ietf:params:oauth:token-type:access_token; with id_jag, resource
// url.
func (o *OAuthOptions) Defaults(url string) {
	if !o.enabled() {
		return
	}
	if o.Grant == "" {
		o.Grant = GrantClientCredentials
	}
	if o.Grant == GrantTokenExchange && o.RequestedTokenType == "" {
		o.RequestedTokenType = tokenexchange.TokenTypeAccessToken
	}
	if o.Grant == GrantIDJAG && o.Resource == "" {
		o.Resource = url
	}
}

// ConnectedAccount reports whether the grant is authorization_code: each
// caller's own connected account, from [Accounts].
func (o OAuthOptions) ConnectedAccount() bool { return o.account() }

// PerCaller reports whether the grant gets a token for each caller with
// the caller's token (token_exchange, jwt_bearer, id_jag): requests are
// then sent with a [CallerTransport] per caller.
func (o OAuthOptions) PerCaller() bool { return o.exchange() }

// SubjectType is the type of the caller's token a per-caller grant wants
// ([TokenTypeIDToken] for id_jag, else [TokenTypeAccessToken]): what to
// ask [Deps.SubjectToken] for.
func (o OAuthOptions) SubjectType() string { return o.subjectType() }

// CallerTransport sends one caller's requests to an HTTP service whose
// token is got for each caller: the service's headers, and the token got
// for the caller's token given with SetSubject, cached until shortly
// before it expires. The caller's own token goes only to the token
// endpoint.
type CallerTransport struct {
	src *tokenexchange.Source
	rt  http.RoundTripper
}

// NewCallerTransport returns a new caller's transport to the HTTP service
// name, as [CredentialTransport] does for Portcullis's own token; o's
// grant is one that [OAuthOptions.PerCaller] reports.
func NewCallerTransport(name string, headers []NamedValue, o OAuthOptions, client *http.Client, next http.RoundTripper) (*CallerTransport, error) {
	cfg, err := exchangeConfig(name, o, client)
	if err != nil {
		return nil, err
	}
	src := tokenexchange.NewSource(cfg, nil)
	rt, err := credentialTransport(name, headers, o, client, next, src)
	if err != nil {
		return nil, err
	}
	return &CallerTransport{src: src, rt: rt}, nil
}

// SetSubject sets the caller's token, of type typ, that the next token
// request presents.
func (c *CallerTransport) SetSubject(token, typ string) {
	c.src.SetSubject(tokenexchange.Subject{Token: token, Type: typ})
}

// RoundTrip sends r with the caller's token; a failed token request
// fails r before it is sent, with an error that holds no token.
func (c *CallerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return c.rt.RoundTrip(r)
}

// exchangeConfig is the request (or chain of requests) that gets a token
// for one caller of the HTTP service name whose oauth block is o (grant
// token_exchange, jwt_bearer or id_jag), made with client. It reads the
// client secret files, so that a rotated secret is picked up.
func exchangeConfig(name string, o OAuthOptions, client *http.Client) (*tokenexchange.Config, error) {
	secret, err := readValueFile(o.ClientSecretFile)
	if err != nil {
		return nil, fmt.Errorf("upstream: %s: oauth.client_secret_file: %w", name, err)
	}
	cfg := &tokenexchange.Config{TokenURL: o.TokenURL, ClientID: o.ClientID, ClientSecret: secret,
		Audience: o.Audience, Resource: o.Resource, Scopes: o.Scopes, RequestedTokenType: o.RequestedTokenType,
		HTTPClient: client}
	switch o.Grant {
	case GrantJWTBearer:
		// Entra ID's on-behalf-of flow; the caller's token is the
		// assertion, and the response a plain token response.
		cfg.GrantType = tokenexchange.GrantTypeJWTBearer
		cfg.Params = url.Values{"requested_token_use": {"on_behalf_of"}}
		cfg.Server = "the identity provider"
	case GrantIDJAG:
		p := o.IdentityProvider
		idpSecret, err := readValueFile(p.ClientSecretFile)
		if err != nil {
			return nil, fmt.Errorf("upstream: %s: oauth.identity_provider.client_secret_file: %w", name, err)
		}
		// The identity provider issues the ID-JAG (the scopes go in it);
		// the upstream's authorization server takes it as the assertion.
		cfg = &tokenexchange.Config{TokenURL: p.TokenURL, ClientID: p.ClientID, ClientSecret: idpSecret,
			RequestedTokenType: tokenexchange.TokenTypeIDJAG, Audience: o.Audience, Resource: o.Resource, Scopes: o.Scopes,
			Server: "the identity provider", HTTPClient: client,
			Next: &tokenexchange.Config{GrantType: tokenexchange.GrantTypeJWTBearer, TokenURL: o.TokenURL,
				ClientID: o.ClientID, ClientSecret: secret, Server: "the upstream's authorization server", HTTPClient: client}}
	}
	return cfg, nil
}
