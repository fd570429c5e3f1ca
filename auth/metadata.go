package auth

import (
	"net/http"
	"net/url"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
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
// ["header"], resource_name) with Cache-Control: public, max-age=300. Mount
// it at both [MetadataWellKnown] and [MetadataPath](o.Resource), for GET and
// OPTIONS.
//
// CORS is open to every origin (Access-Control-Allow-Origin: *), whatever
// mcp.allowed_origins says: the document is public (RFC 9728), carries no
// credentials and reveals nothing a non-browser client cannot fetch, and a
// browser-based MCP client on any origin needs it to find the
// authorization server before it can be allowed anything. A preflight
// (OPTIONS) gets 204 with the methods (GET, OPTIONS), the request headers
// clients send here (MCP-Protocol-Version among them) and a Max-Age.
func MetadataHandler(o Options) http.Handler {
	h := sdkauth.ProtectedResourceMetadataHandler(Metadata(o))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			w.Header().Set("Cache-Control", "public, max-age=300")
		case http.MethodOptions:
			// Set after the SDK's handler sets its own, which names
			// Content-Type only.
			w = &metadataPreflight{ResponseWriter: w}
		}
		h.ServeHTTP(w, r)
	})
}

// metadataAllowHeaders are the request headers a browser may send to the
// metadata endpoints.
var metadataAllowHeaders = strings.Join([]string{"Content-Type", mcpheader.ProtocolVersion}, ", ")

// metadataPreflight completes the SDK's preflight answer.
type metadataPreflight struct{ http.ResponseWriter }

func (p *metadataPreflight) WriteHeader(code int) {
	h := p.Header()
	h.Set("Access-Control-Allow-Headers", metadataAllowHeaders)
	h.Set("Access-Control-Max-Age", "7200")
	h.Set("Cache-Control", "public, max-age=300")
	p.ResponseWriter.WriteHeader(code)
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
