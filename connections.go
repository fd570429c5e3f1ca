package portcullis

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/audit"
	"github.com/portcullis-mcp/portcullis/internal/authserver"
	"github.com/portcullis-mcp/portcullis/internal/connect"
	"github.com/portcullis-mcp/portcullis/internal/keyring"
	"github.com/portcullis-mcp/portcullis/internal/kv"
	"github.com/portcullis-mcp/portcullis/internal/outbound"
	"github.com/portcullis-mcp/portcullis/internal/vault"
)

// setupConnections builds the connected accounts of the upstreams with
// oauth.grant authorization_code (nil when there is none): the vault in
// Redis when there is one (every replica shares it), else in memory; the
// connect pages signing browsers in through the authorization server.
func (a *app) setupConnections(as *authserver.Server) (*connect.Service, error) {
	ups := accountUpstreams(a.cfg.Upstreams)
	if len(ups) == 0 {
		return nil, nil
	}
	if as == nil {
		return nil, errors.New("connected accounts need authorization_server.enabled")
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
	svc, err := connect.New(connect.Options{
		BaseURL: as.Issuer(), Connections: conns, Vault: v, KV: store, SignIn: as, OwnerIssuer: as.Issuer(),
		HTTPClient: client, Logger: a.logger,
		Observe: func(e connect.Event) { a.metrics.ConnectionEvent(e.Connection, e.Action, e.Outcome) },
		Audit: func(ctx context.Context, action, outcome string, owner vault.Owner, conn string, detail ...string) {
			a.audit.connection(ctx, action, outcome, owner, conn, detail...)
		},
		Completed: func(id string) {
			if a.upstreams != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				a.upstreams.ElicitationComplete(ctx, id)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	a.connections.Store(svc)
	return svc, nil
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
