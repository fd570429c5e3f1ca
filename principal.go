package portcullis

import (
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
)

// Principal is the verified caller of a request: subject, issuer, OAuth
// client, scopes, roles and token expiry, from a token the server checked.
// It never holds the token. Treat it as read-only: it may be shared
// between requests.
type Principal = auth.Principal

// Caller returns the verified caller of req, the request a tool, resource
// or prompt handler receives:
//
//	func handler(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
//		p, ok := portcullis.Caller(req)
//		if !ok {
//			return nil, Out{}, errors.New("this tool needs a signed-in user; connect with a token")
//		}
//		…p.Subject, p.HasScopes("orders:read")…
//	}
//
// ok is false when the server runs without auth (stdio, or a loopback
// listener with no issuer configured): there is no caller to report.
func Caller(req sdk.Request) (p *Principal, ok bool) {
	if req == nil {
		return nil, false
	}
	extra := req.GetExtra()
	if extra == nil {
		return nil, false
	}
	return auth.PrincipalFromTokenInfo(extra.TokenInfo)
}

// caller is Caller for the built-in whoami tool, as package toolsets
// takes it.
func caller(req *sdk.CallToolRequest) (toolsets.Caller, bool) {
	p, ok := Caller(req)
	if !ok {
		return toolsets.Caller{}, false
	}
	return toolsets.Caller{Subject: p.Subject, Issuer: p.Issuer, ClientID: p.ClientID, Scopes: p.Scopes, Roles: p.Roles, Expiry: p.Expiry}, true
}
