// Package tokenexchange is a minimal RFC 8693 OAuth 2.0 Token Exchange
// client: it trades a caller's access token (the subject token) for one
// meant for another audience, and caches the result until shortly before
// it expires.
//
// Neither the subject token, the client secret nor the issued token ever
// appears in an error this package returns.
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

// Identifiers of RFC 8693 section 3 and the grant type of section 2.1.
const (
	GrantType            = "urn:ietf:params:oauth:grant-type:token-exchange"
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT         = "urn:ietf:params:oauth:token-type:jwt"
)

// maxResponse bounds the token endpoint's response body.
const maxResponse = 1 << 20

// DefaultLifetime is how long a token issued without expires_in is used.
const DefaultLifetime = time.Minute

// EarlyExpiry is how long before its expiry a cached token is replaced.
const EarlyExpiry = 30 * time.Second

// Timeout bounds one exchange, whatever the context of the request that
// needs it.
const Timeout = 30 * time.Second

// Config is the client of one token endpoint.
type Config struct {
	// TokenURL is the authorization server's token endpoint.
	TokenURL string
	// ClientID and ClientSecret authenticate the client with HTTP Basic
	// (RFC 6749 section 2.3.1).
	ClientID     string
	ClientSecret string
	// Audience and Resource, when set, name the target of the token
	// (RFC 8693 section 2.1).
	Audience string
	Resource string
	// Scopes are requested, space-separated in "scope".
	Scopes []string
	// RequestedTokenType defaults to [TokenTypeAccessToken].
	RequestedTokenType string
	// HTTPClient sends the request; nil means http.DefaultClient.
	HTTPClient *http.Client
}

// Token is an issued token (RFC 8693 section 2.2.1).
type Token struct {
	AccessToken     string
	IssuedTokenType string
	TokenType       string
	Expiry          time.Time
}

// Error is the token endpoint's error response (RFC 8693 section 2.2.2,
// RFC 6749 section 5.2), or a failure to get a usable one. Its text names
// the status and the error code, never a token or secret.
type Error struct {
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
	b.WriteString("token exchange failed")
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

// Exchange trades subjectToken, an access token, for a token of c's
// audience. It fails with an *[Error].
func (c *Config) Exchange(ctx context.Context, subjectToken string, now time.Time) (*Token, error) {
	if subjectToken == "" {
		return nil, &Error{err: errors.New("no subject token")}
	}
	form := url.Values{
		"grant_type":           {GrantType},
		"subject_token":        {subjectToken},
		"subject_token_type":   {TokenTypeAccessToken},
		"requested_token_type": {c.RequestedTokenType},
	}
	if c.RequestedTokenType == "" {
		form.Set("requested_token_type", TokenTypeAccessToken)
	}
	if c.Audience != "" {
		form.Set("audience", c.Audience)
	}
	if c.Resource != "" {
		form.Set("resource", c.Resource)
	}
	if len(c.Scopes) > 0 {
		form.Set("scope", strings.Join(c.Scopes, " "))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, &Error{err: errors.New("bad token endpoint URL")}
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
		return nil, &Error{err: scrubbed(err, subjectToken, c.ClientSecret)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, &Error{Status: resp.StatusCode, err: errors.New("reading the response failed")}
	}
	if len(body) > maxResponse {
		return nil, &Error{Status: resp.StatusCode, err: errors.New("response too large")}
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Code        string `json:"error"`
			Description string `json:"error_description"`
		}
		_ = json.Unmarshal(body, &e)
		return nil, &Error{Status: resp.StatusCode, Code: clean(e.Code, 64, subjectToken, c.ClientSecret),
			Description: clean(e.Description, 200, subjectToken, c.ClientSecret)}
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return nil, &Error{Status: resp.StatusCode, err: errors.New("response is not JSON")}
	}
	var r struct {
		AccessToken     string          `json:"access_token"`
		IssuedTokenType string          `json:"issued_token_type"`
		TokenType       string          `json:"token_type"`
		ExpiresIn       json.RawMessage `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, &Error{Status: resp.StatusCode, err: errors.New("response is not a JSON object")}
	}
	switch {
	case r.AccessToken == "":
		return nil, &Error{Status: resp.StatusCode, err: errors.New("response has no access_token")}
	case !strings.EqualFold(r.TokenType, "Bearer"):
		return nil, &Error{Status: resp.StatusCode, err: fmt.Errorf("token_type %q is not Bearer", clean(r.TokenType, 32, subjectToken, c.ClientSecret))}
	case r.IssuedTokenType == "":
		return nil, &Error{Status: resp.StatusCode, err: errors.New("response has no issued_token_type")}
	}
	life := DefaultLifetime
	if len(r.ExpiresIn) > 0 && string(r.ExpiresIn) != "null" {
		var secs float64
		if err := json.Unmarshal(r.ExpiresIn, &secs); err != nil {
			var s string
			if json.Unmarshal(r.ExpiresIn, &s) != nil || json.Unmarshal([]byte(s), &secs) != nil {
				return nil, &Error{Status: resp.StatusCode, err: errors.New("expires_in is not a number")}
			}
		}
		if secs <= 0 || secs > 366*24*3600 {
			return nil, &Error{Status: resp.StatusCode, err: errors.New("expires_in is out of range")}
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
	subject string
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
func (s *Source) SetSubject(raw string) {
	s.mu.Lock()
	s.subject = raw
	s.mu.Unlock()
}

// Token returns the cached token while it is valid for more than
// EarlyExpiry, and else exchanges the subject token for a new one. Calls
// wait for one another, so that a caller's burst makes one exchange.
func (s *Source) Token(ctx context.Context) (*Token, error) {
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, &Error{err: ctx.Err()}
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
