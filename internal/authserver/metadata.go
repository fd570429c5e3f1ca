package authserver

import "net/http"

// grants are the grant types the token endpoint takes: jwt-bearer (an
// enterprise IdP's ID-JAG) when enterprise_idps are configured.
func (s *Server) grants() []string {
	g := []string{grantCode, grantRefresh}
	if len(s.o.EnterpriseIdPs) > 0 {
		g = append(g, grantJWTBearer)
	}
	return g
}

// metadata is the RFC 8414 document.
func (s *Server) metadata() map[string]any {
	iss := s.o.Issuer
	m := map[string]any{
		"issuer":                                         iss,
		"authorization_endpoint":                         iss + PathAuthorize,
		"token_endpoint":                                 iss + PathToken,
		"revocation_endpoint":                            iss + PathRevoke,
		"jwks_uri":                                       iss + PathJWKS,
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          s.grants(),
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"revocation_endpoint_auth_methods_supported":     []string{"none"},
		"scopes_supported":                               nonNil(s.scopes),
		"authorization_response_iss_parameter_supported": true,
		"client_id_metadata_document_supported":          s.clients.fetcher != nil,
		// OpenID discovery's required members; this server issues access
		// tokens only, no ID tokens.
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"ES256"},
	}
	if s.registrar != nil {
		m["registration_endpoint"] = iss + PathRegister
	}
	if len(s.o.EnterpriseIdPs) > 0 {
		// draft-ietf-oauth-identity-assertion-authz-grant: how MCP
		// clients find that this server takes ID-JAGs.
		m["authorization_grant_profiles_supported"] = []string{idjagProfile}
	}
	return m
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) serveMetadata(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, http.StatusOK, s.metadata())
}
