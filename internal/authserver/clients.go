package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/ory/fosite"

	"github.com/portcullis-mcp/portcullis/internal/clientreg"
	"github.com/portcullis-mcp/portcullis/internal/kv"
)

// Grant types a client may use.
const (
	grantCode      = "authorization_code"
	grantRefresh   = "refresh_token"
	grantJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"
)

// How a client became known, which the consent page says.
const (
	originConfig     = "config"
	originRegistered = "registered"
	originDocument   = "document"
)

// clientRegistry answers fosite's GetClient from the pre-registered
// clients, then the registered ones (in the kv.KV), then Client ID Metadata
// Documents.
type clientRegistry struct {
	static map[string]*client
	// resources are the audiences every client may get tokens for.
	resources []string
	scopes    []string
	kv        kv.KV
	regTTL    time.Duration
	fetcher   *clientreg.Fetcher // nil: documents off
	// httpDocuments: an http:// client_id names a document too
	// (client_metadata_documents.insecure_allow_http).
	httpDocuments bool
	// jwtBearer: clients may use the jwt-bearer grant (enterprise_idps).
	jwtBearer bool
}

// client is a public client using PKCE.
type client struct {
	fosite.DefaultClient
	// name is shown on the consent page.
	name string
	// origin is how the client became known.
	origin string
}

func newClientRegistry(o Options, resources, scopes []string, state kv.KV, fetcher *clientreg.Fetcher) *clientRegistry {
	r := &clientRegistry{static: map[string]*client{}, resources: resources, scopes: scopes, kv: state, regTTL: o.Registration.TTL, fetcher: fetcher, jwtBearer: len(o.EnterpriseIdPs) > 0,
		httpDocuments: o.ClientMetadataDocuments.InsecureAllowHTTP}
	for _, c := range o.Clients {
		r.static[c.ClientID] = r.client(c.ClientID, c.Name, originConfig, c.RedirectURIs)
	}
	return r
}

// client builds a public client of this server: authorization code with
// PKCE and refresh tokens (and an enterprise IdP's ID-JAG when
// enterprise_idps are configured), for any of the server's resources
// (one per grant), with the server's scopes.
func (r *clientRegistry) client(id, name, origin string, redirects []string) *client {
	if name == "" {
		name = id
	}
	grants := []string{grantCode, grantRefresh}
	if r.jwtBearer {
		grants = append(grants, grantJWTBearer)
	}
	return &client{
		name:   name,
		origin: origin,
		DefaultClient: fosite.DefaultClient{
			ID:            id,
			RedirectURIs:  slices.Clone(redirects),
			GrantTypes:    grants,
			ResponseTypes: []string{"code"},
			Scopes:        slices.Clone(r.scopes),
			Audience:      slices.Clone(r.resources),
			Public:        true,
		},
	}
}

// registeredKey names a registered client in the KV.
func registeredKey(id string) string { return kv.Join("client", id) }

// GetClient returns the client, or fosite.ErrNotFound.
func (r *clientRegistry) GetClient(ctx context.Context, id string) (fosite.Client, error) {
	if c, ok := r.static[id]; ok {
		return c, nil
	}
	if clientreg.IsURLClientID(id, r.httpDocuments) {
		if r.fetcher == nil {
			return nil, fosite.ErrInvalidClient.WithHint("Client ID Metadata Documents are off on this server.")
		}
		m, err := r.fetcher.Get(ctx, id)
		if err != nil {
			return nil, fosite.ErrInvalidClient.WithWrap(err).WithHintf("The client metadata document at %s cannot be used: %v", id, err)
		}
		return r.client(id, m.ClientName, originDocument, m.RedirectURIs), nil
	}
	b, err := r.kv.Get(ctx, registeredKey(id))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, fosite.ErrNotFound.WithHintf("Unknown client %q.", id)
	}
	if err != nil {
		return nil, err
	}
	var m clientreg.Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("authserver: registered client %q: %w", id, err)
	}
	return r.client(id, m.ClientName, originRegistered, m.RedirectURIs), nil
}

// touch extends a registered client's life on use.
func (r *clientRegistry) touch(ctx context.Context, c fosite.Client) {
	if cl, ok := c.(*client); ok && cl.origin == originRegistered {
		if b, err := r.kv.Get(ctx, registeredKey(cl.ID)); err == nil {
			_ = r.kv.Set(ctx, registeredKey(cl.ID), b, r.regTTL)
		}
	}
}

// displayName is the name the consent page shows for c, and a note on
// where it comes from.
func displayName(c fosite.Client) (name, note string) {
	cl, ok := c.(*client)
	if !ok {
		return c.GetID(), ""
	}
	switch cl.origin {
	case originRegistered:
		return cl.name, "This application registered itself: its name is its own claim, not verified."
	case originDocument:
		host := cl.ID
		if u, err := url.Parse(cl.ID); err == nil {
			host = u.Host
		}
		return cl.name, "This application is described by " + host + "."
	}
	return cl.name, ""
}

// kvCache is the documents' cache on the kv.KV, so replicas share it.
type kvCache struct{ kv kv.KV }

func (c kvCache) Get(ctx context.Context, key string) ([]byte, bool, error) {
	b, err := c.kv.Get(ctx, key)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, false, nil
	}
	return b, err == nil, err
}

func (c kvCache) Set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	if ttl <= 0 {
		return c.kv.Del(ctx, key)
	}
	return c.kv.Set(ctx, key, val, ttl)
}
