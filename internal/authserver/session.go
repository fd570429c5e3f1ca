package authserver

import (
	"context"
	"slices"
	"time"

	"github.com/ory/fosite"
	"github.com/ory/fosite/handler/oauth2"
	"github.com/ory/fosite/token/jwt"
)

// Session is what a grant carries from sign-in to every token issued
// from it: the user as the identity provider named them. It becomes the
// access token's claims.
type Session struct {
	oauth2.JWTSession
	// User is the signed-in user.
	User User `json:"user"`
}

// User is a user signed in at the identity provider.
type User struct {
	// Subject is the provider's sub claim.
	Subject string `json:"sub"`
	// Email is the user's e-mail address, if the provider gave a verified
	// one.
	Email string `json:"email,omitempty"`
	// Name is a display name, for the consent page.
	Name string `json:"name,omitempty"`
	// Groups are the values of the groups claims (preset or
	// idp.groups_claims): what auth.policy roles match.
	Groups []string `json:"groups,omitempty"`
}

func newSession() *Session {
	return &Session{JWTSession: oauth2.JWTSession{
		JWTClaims: &jwt.JWTClaims{},
		JWTHeader: &jwt.Headers{},
	}}
}

// sessionFor is the session of a grant to clientID for u, whose access
// tokens are RFC 9068 JWTs signed with kid.
func sessionFor(u User, clientID, kid string) *Session {
	s := newSession()
	s.User = u
	s.Subject = u.Subject
	s.JWTClaims.Subject = u.Subject
	extra := map[string]any{"client_id": clientID}
	if u.Email != "" {
		extra["email"] = u.Email
	}
	if len(u.Groups) > 0 {
		extra["groups"] = slices.Clone(u.Groups)
	}
	s.JWTClaims.Extra = extra
	s.JWTHeader.Extra = map[string]any{"typ": "at+jwt", "kid": kid}
	return s
}

// stored is the session as the store keeps it: without what each token
// gets anew (its issue time and expiry), so a refreshed token is not
// stamped with its grant's first issue time.
func (s *Session) stored() *Session {
	c := *s
	if s.JWTClaims != nil {
		claims := *s.JWTClaims
		claims.IssuedAt, claims.NotBefore, claims.ExpiresAt, claims.JTI = zeroTime, zeroTime, zeroTime, ""
		c.JWTClaims = &claims
	}
	return &c
}

// Clone implements fosite.Session with the User kept.
func (s *Session) Clone() fosite.Session {
	if s == nil {
		return nil
	}
	c := *s
	j, _ := s.JWTSession.Clone().(*oauth2.JWTSession)
	if j != nil {
		c.JWTSession = *j
	}
	c.User.Groups = slices.Clone(s.User.Groups)
	return &c
}

// tokenClock is the core strategy with each access token's iat and exp
// taken from one reading of the server's clock, in whole seconds, so
// that exp - iat is access_token_ttl exactly. fosite's grant handlers
// set the expiry from their own time.Now rounded to the second, and its
// JWT strategy the iat from a later one, truncated: a token issued in the
// second half of a second lived a second longer than configured.
//
// The lifespan is access_token_ttl for every client and grant: this
// server's clients set no lifespans of their own.
type tokenClock struct {
	oauth2.CoreStrategy
	lifespan time.Duration
	now      func() time.Time
}

// GenerateAccessToken stamps the session's iat and exp, then has the
// strategy sign the token.
func (c tokenClock) GenerateAccessToken(ctx context.Context, r fosite.Requester) (string, string, error) {
	if s, ok := r.GetSession().(*Session); ok {
		if s.JWTClaims == nil {
			s.JWTClaims = &jwt.JWTClaims{}
		}
		iat := c.now().UTC().Truncate(time.Second)
		s.JWTClaims.IssuedAt = iat
		s.SetExpiresAt(fosite.AccessToken, iat.Add(c.lifespan))
	}
	return c.CoreStrategy.GenerateAccessToken(ctx, r)
}

// issuedLifetime returns the lifetime of the access token just issued for
// r, its exp less its iat (both stamped by tokenClock), for the token
// response's expires_in. fosite's grant handlers compute expires_in from
// their own time.Now, which is later than the iat and is not the
// server's clock: a token of 600 s would be said to expire in 599 s. False
// when r's session carries no such token.
func issuedLifetime(r fosite.Requester) (time.Duration, bool) {
	s, ok := r.GetSession().(*Session)
	if !ok || s.JWTClaims == nil || s.JWTClaims.IssuedAt.IsZero() {
		return 0, false
	}
	exp := s.GetExpiresAt(fosite.AccessToken)
	if exp.IsZero() {
		return 0, false
	}
	return exp.Sub(s.JWTClaims.IssuedAt), true
}
