package portcullis

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/audit"
	"github.com/portcullis-mcp/portcullis/internal/authserver"
	"github.com/portcullis-mcp/portcullis/internal/connect"
	"github.com/portcullis-mcp/portcullis/internal/keyring"
	"github.com/portcullis-mcp/portcullis/internal/kv"
	"github.com/portcullis-mcp/portcullis/internal/outbound"
	"github.com/portcullis-mcp/portcullis/internal/vault"
)

// setupConnections builds the connected accounts of the upstreams and
// HTTP APIs with oauth.grant authorization_code (nil when there is none): the vault in
// Redis when there is one (every replica shares it), else in memory; the
// connect pages signing browsers in through the authorization server.
// A connection made is told to the session that was asked for it on
// whichever replica holds it: through Redis Pub/Sub when there is one,
// until ctx ends.
func (a *app) setupConnections(ctx context.Context, as *authserver.Server) (*connect.Service, error) {
	ups := accountUpstreams(connectionUpstreams(a.cfg.Upstreams, a.cfg.HTTPAPIs))
	if len(ups) == 0 {
		return nil, nil
	}
	keys, err := keyring.Load(a.cfg.Connections.KeysFile)
	if err != nil {
		return nil, fmt.Errorf("connections.keys_file: %w", err)
	}
	ring, err := keyring.New(keys, vault.Purpose)
	if err != nil {
		return nil, fmt.Errorf("connections.keys_file: %w", err)
	}
	var store kv.KV
	if a.redis != nil {
		store = kv.NewRedis(redisKit(a.cfg, a.redis), a.cfg.Redis.KeyPrefix+"connect:")
	} else {
		store = kv.NewMemory(nil)
		a.logger.Warn("connections: no redis.url, so connected accounts live in this replica's memory: run one replica, and expect users to connect again after a restart")
	}
	ttl := a.cfg.Connections.TTL
	if ttl == 0 {
		ttl = DefaultConnectionTTL
	}
	// completed tells the session asked for a connection that it was
	// made (elicitationsCompleted).
	var completed func(id string)
	v, err := vault.New(store, ring, ttl)
	if err != nil {
		return nil, err
	}
	var conns []connect.Connection
	for _, u := range ups {
		c := connect.Connection{Name: u.Name, Title: u.Name, Issuer: u.OAuth.Issuer, AuthURL: u.OAuth.AuthorizationURL,
			TokenURL: u.OAuth.TokenURL, ResourceURL: u.URL, Resource: u.OAuth.Resource, ClientID: u.OAuth.ClientID, Scopes: u.OAuth.Scopes}
		if f := u.OAuth.ClientSecretFile; f != "" {
			// Read at each use, so that a rotated secret is picked up.
			c.ClientSecret = func() (string, error) { return readSecretFile(f) }
		}
		conns = append(conns, c)
		a.metrics.DeclareConnection(u.Name)
	}
	client := &http.Client{Transport: a.tracing.Transport(outbound.Transport()), Timeout: 30 * time.Second}
	signIn, base, issuer, err := a.connectSignIn(as, keys, store, client)
	if err != nil {
		return nil, err
	}
	svc, err := connect.New(connect.Options{
		BaseURL: base, Connections: conns, Vault: v, KV: store, SignIn: signIn, OwnerIssuer: issuer,
		HTTPClient: client, Logger: a.logger, TTL: ttl,
		Observe: func(e connect.Event) { a.metrics.ConnectionEvent(e.Connection, e.Action, e.Outcome) },
		Audit: func(ctx context.Context, action, outcome string, owner vault.Owner, conn string, detail ...string) {
			a.audit.connection(ctx, action, outcome, owner, conn, detail...)
		},
		Completed: func(id string) { completed(id) },
	})
	if err != nil {
		return nil, err
	}
	completed, err = a.elicitationsCompleted(ctx)
	if err != nil {
		return nil, err
	}
	a.connections.Store(svc)
	return svc, nil
}

// connectSignIn is how the connect pages sign users in: through the
// authorization server when Portcullis is one, else as an OpenID Connect
// client of the identity provider (connections.sign_in). It returns the
// sign-in, Portcullis's public URL and the issuer of the users it signs
// in.
func (a *app) connectSignIn(as *authserver.Server, keys [][]byte, store kv.KV, client *http.Client) (connect.SignIn, string, string, error) {
	if as != nil {
		return as, as.Issuer(), as.Issuer(), nil
	}
	o := a.cfg.Connections.SignIn
	secret, err := readSecretFile(o.ClientSecretFile)
	if err != nil {
		return nil, "", "", fmt.Errorf("connections.sign_in.client_secret_file: %w", err)
	}
	ring, err := keyring.New(keys, connect.SessionPurpose)
	if err != nil {
		return nil, "", "", err
	}
	u, err := url.Parse(a.cfg.Auth.Resource)
	if err != nil || u.Host == "" {
		return nil, "", "", fmt.Errorf("auth.resource %q: the connect pages' address is its origin", a.cfg.Auth.Resource)
	}
	base := u.Scheme + "://" + u.Host
	si, err := connect.NewOIDCSignIn(connect.OIDCOptions{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: secret, BaseURL: base,
		Ring: ring, KV: store, HTTPClient: client, Logger: a.logger})
	return si, base, o.Issuer, err
}

// elicitationsCompleted returns what tells the session that got the URL
// elicitation id that it was completed. Without Redis the session is on
// this replica. With Redis the id is published, and every replica, this
// one too, tells its session if it holds it: the connect page's callback
// may reach any replica.
func (a *app) elicitationsCompleted(ctx context.Context) (func(id string), error) {
	local := func(id string) {
		if a.upstreams != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a.upstreams.ElicitationComplete(ctx, id)
		}
	}
	if a.redis == nil {
		return local, nil
	}
	kit := redisKit(a.cfg, a.redis)
	channel := a.cfg.Redis.KeyPrefix + "connect:completed"
	sub, err := kit.Subscribe(ctx, channel)
	if err != nil {
		return nil, fmt.Errorf("connections: subscribing to %s: %w", channel, err)
	}
	go func() {
		defer sub.Close()
		msgs := sub.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-msgs:
				if !ok {
					return
				}
				local(m.Payload)
			}
		}
	}()
	return func(id string) {
		pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.redis.Publish(pctx, channel, id).Err(); err != nil {
			a.logger.Warn("connections: the completion of a connection could not be published to the other replicas", "error", err)
			local(id)
		}
	}, nil
}

// nextConnection chains into a sign-in for resource the accounts its
// server needs that the user subject lacks (authserver.Deps.NextConnection).
func (a *app) nextConnection(ctx context.Context, subject, resource string, attempted []string, returnTo string) (string, string, error) {
	svc := a.connections.Load()
	as := a.authServer.Load()
	if svc == nil || as == nil {
		return "", "", nil
	}
	return svc.Next(ctx, vault.Owner{Issuer: as.Issuer(), Subject: subject}, connectionsNeeded(a.cfg, resource), attempted, returnTo)
}

// connectionsNeeded are the upstreams acting as each user, connected at
// sign-in (oauth.connect_at_sign_in), whose tools, resources or prompts
// the server of resource serves: every one for /mcp, those a virtual
// server selects from for it.
func connectionsNeeded(cfg *configFile, resource string) []string {
	var names []string
	accounts := signInUpstreams(cfg.Upstreams)
	if resource == cfg.Auth.Resource {
		for _, u := range accounts {
			names = append(names, u.Name)
		}
		return names
	}
	for _, s := range cfg.Servers {
		if s.Resource != resource {
			continue
		}
		var sources []string
		for _, t := range s.Tools {
			sources = append(sources, t.Source)
		}
		for _, r := range s.Resources {
			sources = append(sources, r.Source)
		}
		for _, p := range s.Prompts {
			sources = append(sources, p.Source)
		}
		for _, u := range accounts {
			if slices.Contains(sources, u.Name) {
				names = append(names, u.Name)
			}
		}
	}
	return names
}

// readSecretFile reads a mounted secret, without its trailing newline.
func readSecretFile(name string) (string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	s := string(b)
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s, nil
}

// connection records an action on a user's connected account: connect,
// refresh, disconnect.
func (a *auditor) connection(_ context.Context, action, outcome string, o vault.Owner, conn string, detail ...string) {
	if a == nil {
		return
	}
	types := map[string]string{"connect": audit.TypeAccountConnected, "refresh": audit.TypeAccountRefreshed, "disconnect": audit.TypeAccountDisconnected}
	e := &audit.Event{Type: types[action], Outcome: auditOutcome(outcome), Actor: audit.Actor{Issuer: o.Issuer, Subject: o.Subject}, Upstream: conn}
	for i := 0; i+1 < len(detail); i += 2 {
		if detail[i] == "reason" {
			e.Reason = detail[i+1]
			continue
		}
		if e.Detail == nil {
			e.Detail = map[string]string{}
		}
		e.Detail[detail[i]] = detail[i+1]
	}
	a.rec.Record(e)
}

// auditOutcome maps the connections service's outcomes to the audit
// trail's.
func auditOutcome(outcome string) string {
	switch outcome {
	case "ok":
		return audit.OutcomeSuccess
	case "refused":
		return audit.OutcomeRefused
	}
	return audit.OutcomeError
}
