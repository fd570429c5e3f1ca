package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
)

// introspector verifies opaque tokens with RFC 7662. An active response
// is held to the rules a JWT is: an audience naming this resource, a
// subject, exp, nbf and iat within the skew, and the configured issuer.
//
// A token reaches it only when the verified-token cache does not hold it.
// What the endpoint's answer refused is remembered for negativeTTL in
// refused (its own LRU, so that made-up tokens never push verified ones
// out of theirs); requests with one token at once share one call; and
// the calls for the tokens in neither cache are bounded by calls: over
// it, a token is refused with [ReasonIntrospectionThrottled] (the
// middleware answers 503). So random opaque tokens cost the authorization
// server at most that rate.
type introspector struct {
	url        string
	issuer     string // IntrospectionOptions.Issuer; "" accepts any iss, and principals carry url
	clientID   string
	secret     string
	tokens     oauth2.TokenSource // for AuthMethodBearer
	client     *http.Client
	timeout    time.Duration
	audiences  []string
	allowNoAud bool
	roles      []string
	skew       time.Duration
	now        func() time.Time

	refused     *lru.Cache[[sha256.Size]byte, refusal]
	negativeTTL time.Duration
	calls       *rate.Limiter
	callRate    float64
	inflight    singleflight.Group // calls under way, by token hash
}

// refusal is a remembered refusal of a token by the endpoint's answer.
type refusal struct {
	err     *Error
	expires time.Time
}

func newIntrospector(ctx context.Context, o Options, client *http.Client, now func() time.Time) (*introspector, error) {
	in := o.Introspection
	b, err := readSecretFile(in.ClientSecretFile)
	if err != nil {
		return nil, fmt.Errorf("auth: introspection.client_secret_file: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return nil, fmt.Errorf("auth: introspection.client_secret_file %s is empty", in.ClientSecretFile)
	}
	// The audiences any JWT issuer accepts, plus introspection's own.
	auds := []string{o.Resource}
	for _, is := range o.Issuers {
		auds = append(auds, is.Audiences...)
	}
	auds = append(auds, in.Audiences...)
	size := o.CacheSize
	if size <= 0 {
		size = DefaultCacheSize
	}
	refused, err := lru.New[[sha256.Size]byte, refusal](size)
	if err != nil {
		return nil, err
	}
	ttl, perSecond, burst := in.NegativeCacheTTL, in.MaxCallsPerSecond, in.MaxCallsBurst
	if ttl <= 0 {
		ttl = DefaultNegativeCacheTTL
	}
	if perSecond <= 0 {
		perSecond = DefaultIntrospectionRate
	}
	if burst <= 0 {
		burst = DefaultIntrospectionBurst
	}
	ix := &introspector{
		url: in.URL, issuer: in.Issuer, clientID: in.ClientID, secret: secret, client: client,
		timeout: in.Timeout, audiences: auds, allowNoAud: in.AllowMissingAudience,
		roles: o.RolesClaims, skew: o.ClockSkew, now: now,
		refused: refused, negativeTTL: ttl,
		calls: rate.NewLimiter(rate.Limit(perSecond), burst), callRate: perSecond,
	}
	if in.AuthMethod == AuthMethodBearer {
		cc := &clientcredentials.Config{ClientID: in.ClientID, ClientSecret: secret, TokenURL: in.TokenURL}
		// The token source caches and renews the server's own token.
		ix.tokens = cc.TokenSource(context.WithValue(context.WithoutCancel(ctx), oauth2.HTTPClient, client))
	}
	return ix, nil
}

// verify answers from the remembered refusals, or, within the call rate,
// asks the endpoint.
func (ix *introspector) verify(ctx context.Context, token string) (*Principal, error) {
	key := tokenHash(token)
	now := ix.now()
	if r, ok := ix.refused.Get(key); ok {
		if now.Before(r.expires) {
			return nil, r.err
		}
		ix.refused.Remove(key)
	}
	// Requests with the same token at once share one call (and one charge
	// on the bound). The call is not cancelled with the request that
	// happens to make it, which the others wait on; ix.timeout bounds it.
	v, err, _ := ix.inflight.Do(string(key[:]), func() (any, error) {
		if !ix.calls.AllowN(now, 1) {
			return nil, fail(ReasonIntrospectionThrottled, "introspection: over %g calls a second for tokens not in the caches", ix.callRate)
		}
		p, err := ix.introspect(context.WithoutCancel(ctx), token)
		if err != nil {
			var e *Error
			if errors.As(err, &e) && remembered(e.Reason) {
				ix.refused.Add(key, refusal{
					err:     &Error{Reason: e.Reason, Err: fmt.Errorf("%w (an answer remembered for up to %s)", e.Err, ix.negativeTTL)},
					expires: now.Add(ix.negativeTTL),
				})
			}
			return nil, err
		}
		return p, nil
	})
	if err != nil {
		return nil, err
	}
	// Each caller gets a principal of its own: the verified-token cache
	// completes the one it is handed before sharing it.
	p := *v.(*Principal)
	return &p, nil
}

// remembered reports whether a refusal for reason is kept: those the
// endpoint's answer decided and that stay true, not a failed call, and
// not a token that is valid in a moment.
func remembered(r Reason) bool {
	return r != ReasonIntrospectionFailed && r != ReasonNotYetValid
}

// introspect asks the endpoint about token and checks its answer.
func (ix *introspector) introspect(ctx context.Context, token string) (*Principal, error) {
	ctx, cancel := context.WithTimeout(ctx, ix.timeout)
	defer cancel()
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ix.url, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fail(ReasonIntrospectionFailed, "building request: %v", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if ix.tokens != nil {
		t, err := ix.tokens.Token()
		if err != nil {
			return nil, fail(ReasonIntrospectionFailed, "getting the server's own token: %v", err)
		}
		t.SetAuthHeader(req)
	} else {
		// RFC 6749 section 2.3.1: form-encode before basic auth.
		req.SetBasicAuth(url.QueryEscape(ix.clientID), url.QueryEscape(ix.secret))
	}
	resp, err := ix.client.Do(req)
	if err != nil {
		return nil, fail(ReasonIntrospectionFailed, "calling %s: %v", ix.url, redactURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fail(ReasonIntrospectionFailed, "reading response: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fail(ReasonIntrospectionFailed, "%s answered %s", ix.url, resp.Status)
	}
	var claims map[string]json.RawMessage
	if err := json.Unmarshal(body, &claims); err != nil {
		return nil, fail(ReasonIntrospectionFailed, "decoding response: %v", err)
	}
	var std struct {
		Active bool         `json:"active"`
		Sub    string       `json:"sub"`
		Iss    string       `json:"iss"`
		Aud    audience     `json:"aud"`
		Exp    *numericDate `json:"exp"`
		Nbf    *numericDate `json:"nbf"`
		Iat    *numericDate `json:"iat"`
	}
	if err := json.Unmarshal(body, &std); err != nil {
		return nil, fail(ReasonIntrospectionFailed, "decoding response: %v", err)
	}
	if !std.Active {
		return nil, fail(ReasonInactive, "introspection: token is not active")
	}
	now := ix.now()
	var exp time.Time
	if std.Exp != nil {
		exp = time.Time(*std.Exp)
		if !now.Before(exp.Add(ix.skew)) {
			return nil, fail(ReasonExpired, "introspection: expired at %s", exp.UTC().Format(time.RFC3339))
		}
	}
	if std.Nbf != nil && now.Add(ix.skew).Before(time.Time(*std.Nbf)) {
		return nil, fail(ReasonNotYetValid, "introspection: nbf %s is in the future", time.Time(*std.Nbf).UTC().Format(time.RFC3339))
	}
	if std.Iat != nil && now.Add(ix.skew).Before(time.Time(*std.Iat)) {
		return nil, fail(ReasonNotYetValid, "introspection: iat %s is in the future", time.Time(*std.Iat).UTC().Format(time.RFC3339))
	}
	if ix.issuer != "" && std.Iss != "" && std.Iss != ix.issuer {
		return nil, fail(ReasonWrongIssuer, "introspection: iss %q is not %q", std.Iss, ix.issuer)
	}
	// RFC 7662 makes aud optional; this server does not: a token with no
	// audience may have been issued for any service of the authorization
	// server, unless the operator says this one never sets it.
	switch {
	case len(std.Aud) == 0 && !ix.allowNoAud:
		return nil, fail(ReasonWrongAudience, "introspection: response has no aud (set introspection.allow_missing_audience if the authorization server never returns one)")
	case len(std.Aud) > 0 && !audienceOK(std.Aud, ix.audiences):
		return nil, fail(ReasonWrongAudience, "introspection: aud %q names none of the accepted audiences", []string(std.Aud))
	}
	// As for JWTs: without sub, every such token would share one identity,
	// and with it sessions, MRTR state and rate limits.
	if std.Sub == "" {
		return nil, fail(ReasonInvalid, "introspection: response has no sub")
	}
	p := principalFromClaims(claims, ix.roles)
	p.Subject, p.Expiry = std.Sub, exp
	p.Issuer = ix.issuer
	if p.Issuer == "" {
		p.Issuer = ix.url
	}
	return p, nil
}

// audience decodes "aud" as a string or an array of strings.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	*a = stringsClaimExact(b)
	return nil
}

// stringsClaimExact decodes a string (kept whole) or an array of strings.
func stringsClaimExact(raw json.RawMessage) []string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil
		}
		return []string{s}
	}
	var arr []string
	_ = json.Unmarshal(raw, &arr)
	return arr
}

// redactURLError drops the URL error wrapper text (which could carry a
// query string) and keeps the cause.
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// maxSecretFile bounds a client secret file, so a mistaken path (a device,
// a log) fails fast instead of being read without end.
const maxSecretFile = 64 << 10

func readSecretFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxSecretFile {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a secret file", path, maxSecretFile)
	}
	return b, nil
}
