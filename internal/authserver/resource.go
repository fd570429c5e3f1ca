package authserver

import (
	"slices"
	"strings"

	"github.com/ory/fosite"
)

// resource returns the resource whose URL is url.
func (s *Server) resource(url string) (Resource, bool) {
	for _, r := range s.resources {
		if r.URL == url {
			return r, true
		}
	}
	return Resource{}, false
}

// offers reports whether a sign-in for r is offered scope: a scope every
// resource offers, or one of r's own. RFC 9728 has each resource's
// metadata list the scopes asked for it, and a token for r carries only
// scopes that mean something at r; the authorization server's own
// metadata (RFC 8414), one document for every resource, lists them all.
func (s *Server) offers(r Resource, scope string) bool {
	return slices.Contains(s.common, scope) || slices.Contains(r.Scopes, scope)
}

// offeredOf returns those of scopes a sign-in for r is offered.
func (s *Server) offeredOf(r Resource, scopes []string) []string {
	var out []string
	for _, sc := range scopes {
		if s.offers(r, sc) {
			out = append(out, sc)
		}
	}
	return out
}

// errScopeNotOffered is the invalid_scope refusal of scope for r.
func (s *Server) errScopeNotOffered(r Resource, scope string) *fosite.RFC6749Error {
	offered := slices.Concat(s.common, r.Scopes)
	return fosite.ErrInvalidScope.WithHintf("The scope %q is not one of the server %s (%s), which offers: %s.", scope, r.display(), r.URL, strings.Join(offered, ", "))
}

// requestedResource returns the resource a request's resource parameters
// (values) name: exactly one value, a resource of this server.
func (s *Server) requestedResource(values []string) (Resource, bool) {
	if len(values) != 1 {
		return Resource{}, false
	}
	return s.resource(values[0])
}

// resourceURLs are the URLs of the resources, in order.
func (s *Server) resourceURLs() []string {
	out := make([]string, len(s.resources))
	for i, r := range s.resources {
		out[i] = r.URL
	}
	return out
}

// grantResource returns the resource URL a grant is for: its granted
// audience (a refresh token's, or an access request's once the grant
// handler ran), else its requested audience, which finish sets to the
// resource of the sign-in (an authorization code's, before the token
// endpoint grants it). A code issued before resources were recorded
// there has neither: it was for the root server. "" when the grant names
// more than one audience, which this server never grants.
func (s *Server) grantResource(r fosite.Requester) string {
	aud := r.GetGrantedAudience()
	if len(aud) == 0 {
		aud = r.GetRequestedAudience()
	}
	switch len(aud) {
	case 0:
		return s.resources[0].URL
	case 1:
		return aud[0]
	}
	return ""
}

// invalidTargetHint names the resources this server issues tokens for.
func (s *Server) invalidTargetHint() string {
	urls := s.resourceURLs()
	if len(urls) == 1 {
		return "This server issues tokens for the resource " + urls[0] + " only; send it as the resource parameter (RFC 8707)."
	}
	return "This server issues tokens for one of the resources " + strings.Join(urls, ", ") + "; send one as the resource parameter (RFC 8707)."
}
