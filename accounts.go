package portcullis

import (
	"context"
	"errors"
	"sync/atomic"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/connect"
	"github.com/portcullis-mcp/portcullis/internal/vault"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// accounts is the upstreams' Accounts hook: a caller's connected account
// from the connections service, which is set up after the upstreams start
// (with the authorization server), so it is read when called.
type accounts struct {
	svc *atomic.Pointer[connect.Service]
}

// owner is the vault's owner of the caller ti describes.
func owner(ti *sdkauth.TokenInfo) (vault.Owner, bool) {
	p, ok := auth.PrincipalFromTokenInfo(ti)
	if !ok || p.Subject == "" {
		return vault.Owner{}, false
	}
	return vault.Owner{Issuer: p.Issuer, Subject: p.Subject}, true
}

func (h accounts) Token(ctx context.Context, ti *sdkauth.TokenInfo, name string) (string, error) {
	svc := h.svc.Load()
	if svc == nil {
		return "", errors.New("connections: not set up")
	}
	o, ok := owner(ti)
	if !ok {
		return "", errors.New("connections: the call has no signed-in caller")
	}
	tok, err := svc.Token(ctx, name, o)
	if !errors.Is(err, connect.ErrNotConnected) {
		return tok, err
	}
	link, id, err := svc.Require(ctx, name, o)
	if err != nil {
		return "", err
	}
	return "", &upstream.ConnectRequired{Upstream: name, URL: link, ElicitationID: id}
}

func (h accounts) Rejected(ctx context.Context, ti *sdkauth.TokenInfo, name, token string) {
	if svc := h.svc.Load(); svc != nil {
		if o, ok := owner(ti); ok {
			svc.Rejected(ctx, name, o, token)
		}
	}
}
