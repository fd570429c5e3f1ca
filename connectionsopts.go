package portcullis

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/keyring"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// DefaultConnectionTTL is how long a connected account unused is kept.
const DefaultConnectionTTL = 90 * 24 * time.Hour

// connectionsOptions is the connections: section: the vault of the
// accounts users connect at upstreams that act as each user
// (upstreams[].oauth.grant authorization_code).
type connectionsOptions struct {
	// KeysFile holds the vault's keys: one base64-encoded 32-byte key per
	// line, newest first; the first seals, every one opens, so a key is
	// rotated by adding a new first line and dropping the old one once
	// every account was refreshed or connected again. Required when an
	// upstream uses oauth.grant authorization_code; every replica must
	// have the same file.
	KeysFile string `yaml:"keys_file"`
	// TTL is how long a connected account that is not used (and so not
	// refreshed) is kept. Default 2160h (90 days).
	TTL time.Duration `yaml:"ttl"`
	// SignIn is how the connect pages sign users in when Portcullis is not
	// the authorization server (callers' tokens come from the identity
	// provider directly): an OpenID Connect client of that provider, whose
	// redirect URI is <the origin of auth.resource>/connections/signed-in.
	// Required then; with authorization_server.enabled the pages sign in
	// through it instead.
	SignIn connectionsSignIn `yaml:"sign_in"`
}

// connectionsSignIn is the connect pages' OpenID Connect client.
type connectionsSignIn struct {
	// Issuer is the identity provider: one of auth.issuers, whose users'
	// subjects the pages compare with the callers'.
	Issuer string `yaml:"issuer" schema:"url"`
	// ClientID is Portcullis's client at the provider.
	ClientID string `yaml:"client_id"`
	// ClientSecretFile is a mounted file holding its secret.
	ClientSecretFile string `yaml:"client_secret_file"`
}

// accountUpstreams are the upstreams with oauth.grant authorization_code.
func accountUpstreams(ups []upstream.Options) []upstream.Options {
	var out []upstream.Options
	for _, u := range ups {
		if u.OAuth.Grant == upstream.GrantAuthorizationCode {
			out = append(out, u)
		}
	}
	return out
}

// signInUpstreams are the upstreams whose accounts are connected at
// sign-in (oauth.connect_at_sign_in).
func signInUpstreams(ups []upstream.Options) []upstream.Options {
	var out []upstream.Options
	for _, u := range accountUpstreams(ups) {
		if u.OAuth.ConnectAtSignIn {
			out = append(out, u)
		}
	}
	return out
}

// validate checks the connections section against the upstreams, ups,
// that need it; asEnabled is authorization_server.enabled, issuers the
// issuers of auth.issuers.
func (o connectionsOptions) validate(ups []upstream.Options, asEnabled bool, issuers []string) error {
	var errs []error
	if o.TTL < 0 {
		errs = append(errs, errors.New("connections.ttl: must not be negative"))
	}
	needed := accountUpstreams(ups)
	if len(needed) == 0 {
		return errors.Join(errs...)
	}
	if o.KeysFile == "" {
		errs = append(errs, fmt.Errorf("connections.keys_file: required: upstream %q uses oauth.grant authorization_code, whose users' tokens the vault keeps encrypted with these keys", needed[0].Name))
	} else if _, err := keyring.Load(o.KeysFile); err != nil {
		errs = append(errs, fmt.Errorf("connections.keys_file: %w", err))
	}
	si := o.SignIn
	switch {
	case asEnabled && si != (connectionsSignIn{}):
		errs = append(errs, errors.New("connections.sign_in: the connect pages sign users in through the authorization server (authorization_server.enabled): remove sign_in"))
	case asEnabled:
	case si.Issuer == "":
		errs = append(errs, fmt.Errorf("connections.sign_in.issuer: required: upstream %q uses oauth.grant authorization_code, whose connect page signs users in at the identity provider (or enable authorization_server)", needed[0].Name))
	case !slices.Contains(issuers, si.Issuer):
		errs = append(errs, fmt.Errorf("connections.sign_in.issuer: %q is not one of auth.issuers: the pages compare its users with the callers, whose tokens those issuers issue", si.Issuer))
	}
	if sign := signInUpstreams(ups); len(sign) > 0 && !asEnabled {
		errs = append(errs, fmt.Errorf("upstreams: %q: oauth.connect_at_sign_in chains the connection into the sign-in at Portcullis's authorization server, which is not enabled", sign[0].Name))
	}
	if !asEnabled {
		if si.ClientID == "" {
			errs = append(errs, errors.New("connections.sign_in.client_id: required"))
		}
		if si.ClientSecretFile == "" {
			errs = append(errs, errors.New("connections.sign_in.client_secret_file: required"))
		} else if _, err := os.ReadFile(si.ClientSecretFile); err != nil {
			errs = append(errs, fmt.Errorf("connections.sign_in.client_secret_file: %w", err))
		}
	}
	return errors.Join(errs...)
}
