package auth

import (
	"net/http"
	"net/url"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// MetadataWellKnown is the RFC 9728 well-known path prefix.
const MetadataWellKnown = "/.well-known/oauth-protected-resource"

// Metadata returns the Protected Resource Metadata document for o.
func Metadata(o Options) *oauthex.ProtectedResourceMetadata {
	m := &oauthex.ProtectedResourceMetadata{
		Resource:               o.Resource,
		ScopesSupported:        o.ScopesSupported,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           o.ResourceName,
	}
	if m.ResourceName == "" {
		m.ResourceName = DefaultResourceName
	}
	for _, is := range o.Issuers {
		m.AuthorizationServers = append(m.AuthorizationServers, is.Issuer)
	}
	return m
}

// MetadataHandler serves the RFC 9728 JSON document (resource,
// authorization_servers, scopes_supported, bearer_methods_supported
// ["header"], resource_name) with CORS open to any origin and
// Cache-Control: public, max-age=300. Mount it at both
// [MetadataWellKnown] and [MetadataPath](o.Resource).
func MetadataHandler(o Options) http.Handler {
	h := sdkauth.ProtectedResourceMetadataHandler(Metadata(o))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Cache-Control", "public, max-age=300")
		}
		h.ServeHTTP(w, r)
	})
}

// MetadataPath returns the path-suffixed well-known path for resource,
// e.g. "/.well-known/oauth-protected-resource/mcp" for
// https://mcp.example.com/mcp, or the bare well-known path when resource
// has no path.
func MetadataPath(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return MetadataWellKnown
	}
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	if p == "" {
		return MetadataWellKnown
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return MetadataWellKnown + p
}

// MetadataURL returns the absolute URL of the metadata document for
// resource (what the WWW-Authenticate resource_metadata parameter names).
func MetadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil || u.Host == "" {
		return MetadataPath(resource)
	}
	return u.Scheme + "://" + u.Host + MetadataPath(resource)
}
