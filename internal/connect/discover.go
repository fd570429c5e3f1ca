package connect

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// oauthConfig returns c's OAuth client and its authorization server's
// endpoints, discovering them at first use (and again after a failure):
// a connection whose authorization server is down when Portcullis starts
// still works once it is back.
func (s *Service) oauthConfig(ctx context.Context, c *conn) (*oauth2.Config, *endpoints, error) {
	ep, err := s.endpoints(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	secret := ""
	if c.ClientSecret != nil {
		if secret, err = c.ClientSecret(); err != nil {
			return nil, nil, fmt.Errorf("connect: %s: client secret: %w", c.Name, err)
		}
	}
	// A client with a secret authenticates with HTTP Basic
	// (client_secret_basic, RFC 8414's default), unless the server
	// supports only client_secret_post; a public client sends its id.
	style := oauth2.AuthStyleInHeader
	if secret == "" || ep.postOnly {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{
		ClientID: c.ClientID, ClientSecret: secret, Scopes: c.Scopes,
		Endpoint:    oauth2.Endpoint{AuthURL: ep.authURL, TokenURL: ep.tokenURL, AuthStyle: style},
		RedirectURL: s.o.BaseURL + PathCallback,
	}, ep, nil
}

func (s *Service) endpoints(ctx context.Context, c *conn) (*endpoints, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.meta != nil {
		return c.meta, nil
	}
	ep := &endpoints{issuer: c.Issuer, authURL: c.AuthURL, tokenURL: c.TokenURL, resource: c.Resource}
	if ep.issuer == "" {
		prm, err := s.resourceMetadata(ctx, c.ResourceURL)
		if err != nil {
			return nil, err
		}
		ep.issuer = prm.AuthorizationServers[0]
		if ep.resource == "" {
			ep.resource = prm.Resource
		}
	}
	if ep.authURL == "" || ep.tokenURL == "" {
		meta, err := s.serverMetadata(ctx, ep.issuer)
		if err != nil {
			return nil, err
		}
		if ep.authURL == "" {
			ep.authURL = meta.AuthorizationEndpoint
		}
		if ep.tokenURL == "" {
			ep.tokenURL = meta.TokenEndpoint
		}
		ep.revokeURL = meta.RevocationEndpoint
		ep.issRequired = meta.AuthorizationResponseIssParameterSupported
		ep.postOnly = len(meta.TokenEndpointAuthMethodsSupported) > 0 &&
			!slices.Contains(meta.TokenEndpointAuthMethodsSupported, "client_secret_basic") &&
			slices.Contains(meta.TokenEndpointAuthMethodsSupported, "client_secret_post")
	}
	if ep.authURL == "" || ep.tokenURL == "" {
		return nil, fmt.Errorf("connect: %s: the authorization server %s names no authorization or token endpoint", c.Name, ep.issuer)
	}
	c.meta = ep
	return ep, nil
}

// resourceMetadata reads the Protected Resource Metadata of the MCP server
// at resource (RFC 9728: the well-known path inserted before the
// resource's path), which must name an authorization server.
func (s *Service) resourceMetadata(ctx context.Context, resource string) (*oauthex.ProtectedResourceMetadata, error) {
	u, err := url.Parse(resource)
	if err != nil {
		return nil, fmt.Errorf("connect: upstream URL %q: %w", resource, err)
	}
	meta := *u
	meta.Path = "/.well-known/oauth-protected-resource" + strings.TrimSuffix(u.Path, "/")
	meta.RawQuery = ""
	prm, err := oauthex.GetProtectedResourceMetadata(ctx, meta.String(), resource, s.o.HTTPClient)
	if err != nil {
		return nil, fmt.Errorf("connect: the Protected Resource Metadata of %s: %w", resource, err)
	}
	if len(prm.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("connect: the Protected Resource Metadata of %s names no authorization server", resource)
	}
	return prm, nil
}

// serverMetadata reads issuer's metadata: RFC 8414's document, then
// OpenID Connect discovery's, each with the well-known path inserted
// before the issuer's path; the metadata's issuer must be issuer.
func (s *Service) serverMetadata(ctx context.Context, issuer string) (*oauthex.AuthServerMeta, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, fmt.Errorf("connect: issuer %q: %w", issuer, err)
	}
	path := strings.TrimSuffix(u.Path, "/")
	var tried []string
	for _, wk := range []string{"/.well-known/oauth-authorization-server" + path, "/.well-known/openid-configuration" + path, path + "/.well-known/openid-configuration"} {
		m := *u
		m.Path, m.RawQuery = wk, ""
		meta, err := oauthex.GetAuthServerMeta(ctx, m.String(), issuer, s.o.HTTPClient)
		if err != nil {
			return nil, fmt.Errorf("connect: the metadata of %s: %w", issuer, err)
		}
		if meta != nil {
			return meta, nil
		}
		tried = append(tried, m.String())
	}
	return nil, errors.New("connect: no authorization server metadata at " + strings.Join(tried, ", "))
}
