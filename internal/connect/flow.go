package connect

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/oauth2"

	"github.com/portcullis-mcp/portcullis/internal/kv"
	"github.com/portcullis-mcp/portcullis/internal/vault"
)

// pending is a connect link: whom it was made for, and for which
// connection.
type pending struct {
	Connection string      `json:"conn"`
	Owner      vault.Owner `json:"owner"`
	// Return is the local path the browser goes on to once the flow is
	// over (a sign-in that chains connections); empty: a page says it is
	// done.
	Return string `json:"return,omitempty"`
}

// flow is an authorization request at a connection's authorization
// server, keyed by its state.
type flow struct {
	Connection string      `json:"conn"`
	Owner      vault.Owner `json:"owner"`
	Verifier   string      `json:"verifier"`
	Issuer     string      `json:"iss"`
	// Pending is the connect link's id (the elicitation's), if the flow
	// started from one.
	Pending string `json:"pending,omitempty"`
	// Return: see pending.
	Return string `json:"return,omitempty"`
}

func randomID() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Require makes a connect link for owner and the connection name, valid
// for FlowTTL: its URL, and its id, which is the URL-mode elicitation's
// id that [Options.Completed] is told of once the account is connected.
func (s *Service) Require(ctx context.Context, name string, owner vault.Owner) (link, id string, err error) {
	return s.link(ctx, name, owner, "")
}

// Next returns, for a sign-in that chains the connections names the user
// owner needs, the first of them owner lacks, leaving out attempted, and
// the link that connects it and then sends the browser to returnTo, a
// local path; an empty link when owner lacks none.
func (s *Service) Next(ctx context.Context, owner vault.Owner, names, attempted []string, returnTo string) (name, link string, err error) {
	if !localPath(returnTo) {
		return "", "", errors.New("connect: the page to return to is not on this server")
	}
	for _, n := range names {
		if slices.Contains(attempted, n) || !s.Has(n) {
			continue
		}
		_, _, err := s.o.Vault.Get(ctx, n, owner)
		switch {
		case err == nil:
			continue
		case !errors.Is(err, vault.ErrNotConnected) && !errors.Is(err, vault.ErrSealed):
			return "", "", err
		}
		link, _, err := s.link(ctx, n, owner, returnTo)
		return n, link, err
	}
	return "", "", nil
}

// localPath reports whether p is a path on this server: absolute, with no
// scheme or host, no backslash and no control character.
func localPath(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "//") && !strings.Contains(p, "\\") &&
		!strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// link makes a connect link for owner and the connection name that sends
// the browser to returnTo once done (empty: a page says it is done).
func (s *Service) link(ctx context.Context, name string, owner vault.Owner, returnTo string) (link, id string, err error) {
	if !s.Has(name) {
		return "", "", errors.New("connect: no connection " + name)
	}
	if owner.Issuer != s.o.OwnerIssuer {
		// The connect page signs users in through OwnerIssuer: a caller
		// with another issuer's token could never finish.
		return "", "", fmt.Errorf("connect: accounts are connected by users signed in through %s", s.o.OwnerIssuer)
	}
	id = randomID()
	b, _ := json.Marshal(pending{Connection: name, Owner: owner, Return: returnTo})
	if err := s.o.KV.Set(ctx, kv.Join("connect-link", kv.Hash(id)), b, FlowTTL); err != nil {
		return "", "", err
	}
	return s.o.BaseURL + PathStart + "?id=" + url.QueryEscape(id), id, nil
}

// record reads the JSON record under key with get (the store's Get, or
// GetDel for what is used once) into v, whose connection is *conn: an
// absent or unreadable record, or one of a connection no longer
// configured, is answered with the page title and msg and counted as
// refused for reason; a store failure with 503.
func (s *Service) record(w http.ResponseWriter, r *http.Request, get func(context.Context, string) ([]byte, error), key string, conn *string, v any, reason, title, msg string) bool {
	b, err := get(r.Context(), key)
	switch {
	case err != nil && !errors.Is(err, kv.ErrNotFound):
		s.unavailable(w, "connect", err)
		return false
	case err != nil || json.Unmarshal(b, v) != nil || !s.Has(*conn):
		s.o.Observe(Event{Action: "connect", Outcome: "refused", Reason: reason})
		s.message(w, http.StatusBadRequest, title, msg)
		return false
	}
	return true
}

// serveStart is a connect link: the browser signs in, and the user it
// signed in as must be the one the link was made for.
func (s *Service) serveStart(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.URL.Query().Get("id")
	var p pending
	if !s.record(w, r, s.o.KV.Get, kv.Join("connect-link", kv.Hash(id)), &p.Connection, &p, "unknown_link",
		"Link expired", "This link is unknown or has expired. Call the tool again for a new one.") {
		return
	}
	owner, ok := s.user(w, r, PathStart+"?id="+url.QueryEscape(id))
	if !ok {
		return
	}
	if owner != p.Owner {
		s.o.Observe(Event{Connection: p.Connection, Action: "connect", Outcome: "refused", Reason: "other_user"})
		s.o.Audit(ctx, "connect", "refused", owner, p.Connection, "reason", "other_user")
		s.message(w, http.StatusForbidden, "Not your link", "This link was made for another user. Only the user whose call asked for it can connect an account with it.")
		return
	}
	s.begin(w, r, s.conns[p.Connection], owner, id, p.Return)
}

// serveConnect starts a connection from the page.
func (s *Service) serveConnect(w http.ResponseWriter, r *http.Request) {
	c, ok := s.conns[r.PathValue("name")]
	if !ok {
		s.message(w, http.StatusNotFound, "Unknown connection", "There is no such connection.")
		return
	}
	owner, ok := s.user(w, r, PathPage)
	if !ok {
		return
	}
	s.begin(w, r, c, owner, "", "")
}

// begin sends the browser to c's authorization server.
func (s *Service) begin(w http.ResponseWriter, r *http.Request, c *conn, owner vault.Owner, pendingID, returnTo string) {
	ctx := r.Context()
	cfg, ep, err := s.oauthConfig(ctx, c)
	if err != nil {
		s.o.Logger.Warn("connect: the authorization server cannot be used", "connection", c.Name, "error", err)
		s.o.Observe(Event{Connection: c.Name, Action: "connect", Outcome: "error", Reason: "discovery"})
		s.message(w, http.StatusBadGateway, "Service unavailable", "The service's sign-in cannot be reached; try again shortly.")
		return
	}
	f := flow{Connection: c.Name, Owner: owner, Verifier: oauth2.GenerateVerifier(), Issuer: ep.issuer, Pending: pendingID, Return: returnTo}
	state := randomID()
	b, _ := json.Marshal(f)
	if err := s.o.KV.Set(ctx, kv.Join("connect-flow", kv.Hash(state)), b, FlowTTL); err != nil {
		s.unavailable(w, "connect", err)
		return
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(f.Verifier)}
	if ep.resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", ep.resource))
	}
	http.Redirect(w, r, cfg.AuthCodeURL(state, opts...), http.StatusSeeOther)
}

// serveCallback is where the authorization server sends the browser back.
func (s *Service) serveCallback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	var f flow
	if !s.record(w, r, s.o.KV.GetDel, kv.Join("connect-flow", kv.Hash(q.Get("state"))), &f.Connection, &f, "unknown_state",
		"Connection expired", "This connection attempt is unknown, was finished already, or has expired. Start again.") {
		return
	}
	c := s.conns[f.Connection]
	sub, ok := s.o.SignIn.BrowserUser(r)
	if !ok || (vault.Owner{Issuer: s.o.OwnerIssuer, Subject: sub}) != f.Owner {
		s.o.Observe(Event{Connection: c.Name, Action: "connect", Outcome: "refused", Reason: "other_user"})
		s.o.Audit(ctx, "connect", "refused", f.Owner, c.Name, "reason", "other_user")
		s.message(w, http.StatusForbidden, "Not your connection", "This connection was started by another user or in another browser.")
		return
	}
	if e := q.Get("error"); e != "" {
		s.o.Observe(Event{Connection: c.Name, Action: "connect", Outcome: "refused", Reason: "denied"})
		s.o.Audit(ctx, "connect", "refused", f.Owner, c.Name, "reason", "denied", "error", clean(e))
		message(w, http.StatusForbidden, "Not connected", c.Title+" did not connect the account ("+clean(e)+").", f.Return)
		return
	}
	cfg, ep, err := s.oauthConfig(ctx, c)
	if err != nil {
		s.message(w, http.StatusBadGateway, "Service unavailable", "The service's sign-in cannot be reached; try again shortly.")
		return
	}
	// RFC 9207: the response names the server the flow went to, so a
	// response from another one (a mix-up) is refused.
	if iss := q.Get("iss"); (iss != "" && iss != f.Issuer) || (iss == "" && ep.issRequired) || ep.issuer != f.Issuer {
		s.o.Observe(Event{Connection: c.Name, Action: "connect", Outcome: "refused", Reason: "issuer"})
		s.o.Audit(ctx, "connect", "refused", f.Owner, c.Name, "reason", "issuer")
		s.message(w, http.StatusBadRequest, "Not connected", "The answer did not come from "+c.Title+"'s authorization server.")
		return
	}
	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(f.Verifier)}
	if ep.resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", ep.resource))
	}
	tok, err := cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, s.o.HTTPClient), q.Get("code"), opts...)
	if err != nil {
		s.o.Logger.Warn("connect: the authorization code was not exchanged", "connection", c.Name, "error", oauthError(err))
		s.o.Observe(Event{Connection: c.Name, Action: "connect", Outcome: "error", Reason: "token_endpoint"})
		s.o.Audit(ctx, "connect", "error", f.Owner, c.Name, "reason", "token_endpoint")
		s.message(w, http.StatusBadGateway, "Not connected", c.Title+" did not issue a token: "+oauthError(err)+".")
		return
	}
	if err := s.o.Vault.Put(ctx, c.Name, f.Owner, entryOf(tok, ep.issuer, s.o.Now(), s.o.Now())); err != nil {
		s.unavailable(w, "connect", err)
		return
	}
	s.forget(cacheKey{c.Name, f.Owner})
	s.o.Observe(Event{Connection: c.Name, Action: "connect", Outcome: "ok"})
	s.o.Audit(ctx, "connect", "ok", f.Owner, c.Name)
	if f.Pending != "" {
		_ = s.o.KV.Del(ctx, kv.Join("connect-link", kv.Hash(f.Pending)))
		s.o.Completed(f.Pending)
	}
	if f.Return != "" {
		http.Redirect(w, r, f.Return, http.StatusSeeOther)
		return
	}
	s.message(w, http.StatusOK, "Connected", c.Title+" is connected. You can close this page and go back to your application.")
}

// serveDisconnect drops the user's connection, revoking its refresh token
// at the authorization server where it offers revocation.
func (s *Service) serveDisconnect(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, ok := s.conns[r.PathValue("name")]
	if !ok {
		s.message(w, http.StatusNotFound, "Unknown connection", "There is no such connection.")
		return
	}
	owner, ok := s.user(w, r, PathPage)
	if !ok {
		return
	}
	if e, _, err := s.o.Vault.Get(ctx, c.Name, owner); err == nil {
		s.revoke(ctx, c, e)
	}
	if err := s.Disconnect(ctx, c.Name, owner); err != nil {
		s.unavailable(w, "disconnect", err)
		return
	}
	s.o.Observe(Event{Connection: c.Name, Action: "disconnect", Outcome: "ok"})
	s.o.Audit(ctx, "disconnect", "ok", owner, c.Name)
	http.Redirect(w, r, PathPage, http.StatusSeeOther)
}

// unavailable answers a store failure.
func (s *Service) unavailable(w http.ResponseWriter, action string, err error) {
	s.o.Logger.Warn("connect: the store failed", "action", action, "error", err)
	s.o.Observe(Event{Action: action, Outcome: "error", Reason: "store"})
	s.message(w, http.StatusServiceUnavailable, "Unavailable", "Connections are unavailable for a moment; try again shortly.")
}
