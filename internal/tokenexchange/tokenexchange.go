// Package tokenexchange is a minimal client of the OAuth grants that get
// an upstream a token for one caller: RFC 8693 Token Exchange (the
// caller's token, the subject token, traded for one meant for another
// audience), the RFC 7523 JWT bearer grant with the subject token as the
// assertion (Entra ID's on-behalf-of flow), and the two chained: an
// RFC 8693 exchange at the identity provider for an Identity Assertion JWT
// Authorization Grant (ID-JAG, draft-ietf-oauth-identity-assertion-authz-grant),
// then the JWT bearer grant with it at the upstream's authorization server
// (enterprise-managed authorization). A [Source] caches one caller's
// result until shortly before it expires; a [Transport] sends it.
//
// Neither the subject token, a client secret, an intermediate token nor
// the issued token ever appears in an error this package returns.
package tokenexchange

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Identifiers of RFC 8693 section 3, the grant types of RFC 8693 section
// 2.1 and RFC 7523 section 2.1, and the ID-JAG token type.
const (
	GrantType            = "urn:ietf:params:oauth:grant-type:token-exchange"
	GrantTypeJWTBearer   = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT         = "urn:ietf:params:oauth:token-type:jwt"
	TokenTypeIDToken     = "urn:ietf:params:oauth:token-type:id_token"
	TokenTypeIDJAG       = "urn:ietf:params:oauth:token-type:id-jag"
)

// maxResponse bounds the token endpoint's response body.
const maxResponse = 1 << 20

// DefaultLifetime is how long a token issued without expires_in is used.
const DefaultLifetime = time.Minute

// EarlyExpiry is how long before its expiry a cached token is replaced.
const EarlyExpiry = 30 * time.Second

// Timeout bounds one exchange (every request of a chain), whatever the
// context of the request that needs it.
const Timeout = 30 * time.Second

// Subject is the token a request is made for: the caller's, or the token
// an earlier request of a chain issued.
type Subject struct {
	Token string
	// Type is its RFC 8693 token type, sent as subject_token_type by a
	// token exchange; empty means [TokenTypeAccessToken]. The JWT bearer
	// grant sends no type.
	Type string
}

// Config is the client of one token endpoint: one request, or the first
// of a chain (Next).
type Config struct {
	// GrantType is [GrantType] (RFC 8693, the default) or
	// [GrantTypeJWTBearer] (RFC 7523: the subject token is the
	// assertion).
	GrantType string
	// TokenURL is the authorization server's token endpoint.
	TokenURL string
	// ClientID and ClientSecret authenticate the client with HTTP Basic
	// (RFC 6749 section 2.3.1).
	ClientID     string
	ClientSecret string
	// Audience (token exchange only) and Resource, when set, name the
	// target of the token (RFC 8693 section 2.1, RFC 8707).
	Audience string
	Resource string
	// Scopes are requested, space-separated in "scope".
	Scopes []string
	// RequestedTokenType defaults to [TokenTypeAccessToken] (token
	// exchange only).
	RequestedTokenType string
	// Params are more form parameters (Entra's on-behalf-of:
	// requested_token_use=on_behalf_of). They do not replace the ones
	// above.
	Params url.Values
	// Server names the server in errors, as in "the identity provider";
	// empty means "the authorization server".
	Server string
	// Next, when set, is the next request of a chain: its subject token
	// (its assertion) is the token this one issues, whose type must then
	// be RequestedTokenType. The last request's token is the result, and
	// only it must be a bearer token.
	Next *Config
	// HTTPClient sends the request; nil means http.DefaultClient.
	HTTPClient *http.Client
}

// Token is an issued token (RFC 8693 section 2.2.1, RFC 6749 section
// 5.1).
type Token struct {
	AccessToken string
	// IssuedTokenType is empty for the JWT bearer grant.
	IssuedTokenType string
	TokenType       string
	Expiry          time.Time
}

// Error is the token endpoint's error response (RFC 8693 section 2.2.2,
// RFC 6749 section 5.2), or a failure to get a usable one. Its text names
// the grant, the server, the status and the error code, never a token or
// secret.
type Error struct {
	// Grant is the grant type of the failed request.
	Grant string
	// Server names the server that failed (Config.Server).
	Server string
	// Status is the HTTP status, 0 when the request was not answered.
	Status int
	// Code is the "error" field; empty when the response was not an
	// OAuth error.
	Code string
	// Description is the "error_description" field, cut short, with any
	// token or secret of the request removed.
	Description string
	err         error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Grant == GrantTypeJWTBearer {
		b.WriteString("jwt-bearer grant failed")
	} else {
		b.WriteString("token exchange failed")
	}
	if e.Server != "" {
		fmt.Fprintf(&b, " at %s", e.Server)
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, ": %s", e.Code)
	}
	if e.Description != "" {
		fmt.Fprintf(&b, ": %s", e.Description)
	}
	if e.err != nil {
		fmt.Fprintf(&b, ": %v", e.err)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.err }

// Exchange makes c's request with subject, and then each Next's with the
// token the one before issued, and returns the last token. It fails with
// an *[Error].
func (c *Config) Exchange(ctx context.Context, subject Subject, now time.Time) (*Token, error) {
	if subject.Token == "" {
		return nil, c.fail(0, errors.New("no subject token"))
	}
	secrets := []string{subject.Token}
	for step := c; ; step = step.Next {
		secrets = append(secrets, step.ClientSecret)
		tok, err := step.request(ctx, subject, now, secrets)
		if err != nil || step.Next == nil {
			return tok, err
		}
		subject = Subject{Token: tok.AccessToken, Type: tok.IssuedTokenType}
		secrets = append(secrets, tok.AccessToken)
	}
}

func (c *Config) grant() string {
	if c.GrantType == "" {
		return GrantType
	}
	return c.GrantType
}

// fail is an *Error of c's request.
func (c *Config) fail(status int, err error) *Error {
	return &Error{Grant: c.grant(), Server: c.Server, Status: status, err: err}
}

// form is the request's body.
func (c *Config) form(subject Subject) url.Values {
	form := url.Values{}
	for k, v := range c.Params {
		form[k] = append([]string(nil), v...)
	}
	form.Set("grant_type", c.grant())
	if c.grant() == GrantTypeJWTBearer {
		form.Set("assertion", subject.Token)
	} else {
		typ := subject.Type
		if typ == "" {
			typ = TokenTypeAccessToken
		}
		form.Set("subject_token", subject.Token)
		form.Set("subject_token_type", typ)
		form.Set("requested_token_type", c.requested())
		if c.Audience != "" {
			form.Set("audience", c.Audience)
		}
	}
	if c.Resource != "" {
		form.Set("resource", c.Resource)
	}
	if len(c.Scopes) > 0 {
		form.Set("scope", strings.Join(c.Scopes, " "))
	}
	return form
}

func (c *Config) requested() string {
	if c.RequestedTokenType == "" {
		return TokenTypeAccessToken
	}
	return c.RequestedTokenType
}

// request makes c's one request; secrets are what its errors must not
// show.
func (c *Config) request(ctx context.Context, subject Subject, now time.Time, secrets []string) (*Token, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.TokenURL, strings.NewReader(c.form(subject).Encode()))
	if err != nil {
		return nil, c.fail(0, errors.New("bad token endpoint URL"))
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(c.ClientID), url.QueryEscape(c.ClientSecret))
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		// A *url.Error names the URL only, never the body.
		return nil, c.fail(0, scrubbed(err, secrets...))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, c.fail(resp.StatusCode, errors.New("reading the response failed"))
	}
	if len(body) > maxResponse {
		return nil, c.fail(resp.StatusCode, errors.New("response too large"))
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Code        string `json:"error"`
			Description string `json:"error_description"`
		}
		_ = json.Unmarshal(body, &e)
		xe := c.fail(resp.StatusCode, nil)
		xe.Code, xe.Description = clean(e.Code, 64, secrets...), clean(e.Description, 200, secrets...)
		return nil, xe
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return nil, c.fail(resp.StatusCode, errors.New("response is not JSON"))
	}
	var r struct {
		AccessToken     string          `json:"access_token"`
		IssuedTokenType string          `json:"issued_token_type"`
		TokenType       string          `json:"token_type"`
		ExpiresIn       json.RawMessage `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, c.fail(resp.StatusCode, errors.New("response is not a JSON object"))
	}
	exchange := c.grant() == GrantType
	switch {
	case r.AccessToken == "":
		return nil, c.fail(resp.StatusCode, errors.New("response has no access_token"))
	case c.Next == nil && !strings.EqualFold(r.TokenType, "Bearer"):
		return nil, c.fail(resp.StatusCode, fmt.Errorf("token_type %q is not Bearer", clean(r.TokenType, 32, secrets...)))
	case exchange && r.IssuedTokenType == "":
		return nil, c.fail(resp.StatusCode, errors.New("response has no issued_token_type"))
	case c.Next != nil && r.IssuedTokenType != c.requested():
		return nil, c.fail(resp.StatusCode, fmt.Errorf("issued_token_type %q is not the %s requested", clean(r.IssuedTokenType, 64, secrets...), c.requested()))
	}
	life := DefaultLifetime
	if len(r.ExpiresIn) > 0 && string(r.ExpiresIn) != "null" {
		var secs float64
		if err := json.Unmarshal(r.ExpiresIn, &secs); err != nil {
			var s string
			if json.Unmarshal(r.ExpiresIn, &s) != nil || json.Unmarshal([]byte(s), &secs) != nil {
				return nil, c.fail(resp.StatusCode, errors.New("expires_in is not a number"))
			}
		}
		if secs <= 0 || secs > 366*24*3600 {
			return nil, c.fail(resp.StatusCode, errors.New("expires_in is out of range"))
		}
		life = time.Duration(secs) * time.Second
	}
	return &Token{AccessToken: r.AccessToken, IssuedTokenType: r.IssuedTokenType, TokenType: r.TokenType, Expiry: now.Add(life)}, nil
}

// clean cuts s to n bytes of printable ASCII and removes secrets from it.
func clean(s string, n int, secrets ...string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

func scrubbed(err error, secrets ...string) error {
	return errors.New(clean(err.Error(), 300, secrets...))
}

// Source exchanges one caller's token and caches the result until
// [EarlyExpiry] before it expires. The caller's latest token is given
// with [Source.SetSubject] on each of its requests.
type Source struct {
	cfg *Config
	now func() time.Time

	mu      sync.Mutex // guards subject
	subject Subject
	// turn, a semaphore of one, guards tok and serializes exchanges;
	// waiting for it ends with the waiter's context.
	turn chan struct{}
	tok  *Token
}

// NewSource returns a Source of cfg; now nil means time.Now.
func NewSource(cfg *Config, now func() time.Time) *Source {
	if now == nil {
		now = time.Now
	}
	return &Source{cfg: cfg, now: now, turn: make(chan struct{}, 1)}
}

// SetSubject sets the subject token of the next exchange.
func (s *Source) SetSubject(sub Subject) {
	s.mu.Lock()
	s.subject = sub
	s.mu.Unlock()
}

// Token returns the cached token while it is valid for more than
// EarlyExpiry, and else exchanges the subject token for a new one. Calls
// wait for one another, so that a caller's burst makes one exchange.
func (s *Source) Token(ctx context.Context) (*Token, error) {
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, s.cfg.fail(0, ctx.Err())
	}
	defer func() { <-s.turn }()
	now := s.now()
	if s.tok != nil && now.Add(EarlyExpiry).Before(s.tok.Expiry) {
		return s.tok, nil
	}
	s.tok = nil
	s.mu.Lock()
	subject := s.subject
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	t, err := s.cfg.Exchange(ctx, subject, now)
	if err != nil {
		return nil, err
	}
	s.tok = t
	return t, nil
}

// Transport sends each request with the Source's token as a bearer
// token; a failed exchange fails the request before it is sent.
type Transport struct {
	Source *Source
	Base   http.RoundTripper
}

func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, err := t.Source.Token(r.Context())
	if err != nil {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return t.Base.RoundTrip(r)
}
