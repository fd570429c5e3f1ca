package authserver

import (
	"context"
	"slices"

	"github.com/ory/fosite"
)

// Grant types a client may use.
const (
	grantCode      = "authorization_code"
	grantRefresh   = "refresh_token"
	grantJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"
)

// clientRegistry answers fosite's GetClient from the pre-registered
// clients, then the registered ones, then Client ID Metadata Documents.
type clientRegistry struct {
	static   map[string]*client
	resource string
	scopes   []string
	// jwtBearer: clients may use the jwt-bearer grant (enterprise_idps).
	jwtBearer bool
}

// client is a public client using PKCE.
type client struct {
	fosite.DefaultClient
	// name is shown on the consent page.
	name string
}

func newClientRegistry(o Options, resource string, scopes []string) *clientRegistry {
	r := &clientRegistry{static: map[string]*client{}, resource: resource, scopes: scopes, jwtBearer: len(o.EnterpriseIdPs) > 0}
	for _, c := range o.Clients {
		r.static[c.ClientID] = r.client(c.ClientID, c.Name, c.RedirectURIs)
	}
	return r
}

// client builds a public client of this server: authorization code with
// PKCE and refresh tokens (and an enterprise IdP's ID-JAG when
// enterprise_idps are configured), for the one resource, with the
// server's scopes.
func (r *clientRegistry) client(id, name string, redirects []string) *client {
	if name == "" {
		name = id
	}
	grants := []string{grantCode, grantRefresh}
	if r.jwtBearer {
		grants = append(grants, grantJWTBearer)
	}
	return &client{
		name: name,
		DefaultClient: fosite.DefaultClient{
			ID:            id,
			RedirectURIs:  slices.Clone(redirects),
			GrantTypes:    grants,
			ResponseTypes: []string{"code"},
			Scopes:        slices.Clone(r.scopes),
			Audience:      []string{r.resource},
			Public:        true,
		},
	}
}

// GetClient returns the client, or fosite.ErrNotFound.
func (r *clientRegistry) GetClient(_ context.Context, id string) (fosite.Client, error) {
	if c, ok := r.static[id]; ok {
		return c, nil
	}
	return nil, fosite.ErrNotFound.WithHintf("Unknown client %q.", id)
}

// displayName is the name the consent page shows for c.
func displayName(c fosite.Client) string {
	if c, ok := c.(*client); ok {
		return c.name
	}
	return c.GetID()
}
