package toolsets

import (
	"context"
	"errors"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
)

// whoamiOutput is who the server believes the caller is. It holds the
// verified claims only, never the token.
type whoamiOutput struct {
	Subject   string    `json:"subject" jsonschema:"The caller's subject (sub claim)."`
	Issuer    string    `json:"issuer" jsonschema:"The identity provider that issued the caller's token."`
	ClientID  string    `json:"client_id,omitempty" jsonschema:"The OAuth client the token was issued to."`
	Scopes    []string  `json:"scopes" jsonschema:"The scopes the token grants."`
	Roles     []string  `json:"roles" jsonschema:"Roles and groups from the token."`
	ExpiresAt time.Time `json:"expires_at,omitzero" jsonschema:"When the token expires (RFC 3339)."`
}

// whoamiTool reports the verified identity behind the call, as caller
// (nil: none) tells it.
func whoamiTool(caller func(*sdk.CallToolRequest) (Caller, bool)) catalog.Tool {
	return catalog.NewTool(&sdk.Tool{
		Name:  "whoami",
		Title: "Who am I",
		Description: "Returns the identity this server verified for the caller: subject, issuer, OAuth client, " +
			"scopes, roles and token expiry. Call it to explain why a tool is or is not available, or when the " +
			"user asks which account they are connected as. Takes no arguments.",
		InputSchema: emptyObject(),
		Annotations: readOnly("Who am I", false),
	}, func(_ context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, whoamiOutput, error) {
		var p Caller
		ok := caller != nil
		if ok {
			p, ok = caller(req)
		}
		if !ok {
			return nil, whoamiOutput{}, errors.New("this call carries no verified identity: the server runs without " +
				"authentication (local or stdio use), so there is no user to report")
		}
		return nil, whoamiOutput{
			Subject:   p.Subject,
			Issuer:    p.Issuer,
			ClientID:  p.ClientID,
			Scopes:    nonNil(p.Scopes),
			Roles:     nonNil(p.Roles),
			ExpiresAt: p.Expiry,
		}, nil
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
