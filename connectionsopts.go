package portcullis

import (
	"errors"
	"fmt"
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

// validate checks the connections section against the upstreams, ups,
// that need it; asEnabled is authorization_server.enabled.
func (o connectionsOptions) validate(ups []upstream.Options, asEnabled bool) error {
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
	if !asEnabled {
		errs = append(errs, fmt.Errorf("upstreams: %q uses oauth.grant authorization_code, which needs authorization_server.enabled: the connect page signs users in through it", needed[0].Name))
	}
	return errors.Join(errs...)
}
