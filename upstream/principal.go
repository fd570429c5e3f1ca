package upstream

import (
	"strings"
)

// Principal is the verified identity of a caller that a stdio server may
// be given (pass_principal). It holds no credential.
type Principal struct {
	Issuer   string
	Subject  string
	ClientID string
	Scopes   []string
}

// environ is the identity as MCP_PRINCIPAL_* environment variables.
func (p Principal) environ() []string {
	return []string{
		"MCP_PRINCIPAL_ISSUER=" + p.Issuer,
		"MCP_PRINCIPAL_SUBJECT=" + p.Subject,
		"MCP_PRINCIPAL_CLIENT_ID=" + p.ClientID,
		"MCP_PRINCIPAL_SCOPES=" + strings.Join(p.Scopes, " "),
	}
}

// meta is the identity as the value of MetaKeyPrincipal.
func (p Principal) meta() map[string]any {
	scopes := p.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return map[string]any{"issuer": p.Issuer, "subject": p.Subject, "client_id": p.ClientID, "scopes": scopes}
}
