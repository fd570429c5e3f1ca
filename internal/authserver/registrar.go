package authserver

import (
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/portcullis-mcp/portcullis/internal/clientreg"
)

// registrar serves /oauth/register.
type registrar struct {
	o     RegistrationOptions
	token []byte // the initial access token (mode token)
	all   *rate.Limiter
	now   func() time.Time
}

func newRegistrar(o RegistrationOptions, now func() time.Time) (*registrar, error) {
	r := &registrar{o: o, now: now, all: rate.NewLimiter(rate.Limit(float64(o.PerMinute)/60), o.PerMinute)}
	if o.Mode == RegistrationToken {
		b, err := os.ReadFile(o.InitialAccessTokenFile)
		if err != nil {
			return nil, fmt.Errorf("registration.initial_access_token_file: %w", err)
		}
		if r.token = []byte(strings.TrimSpace(string(b))); len(r.token) < 16 {
			return nil, fmt.Errorf("registration.initial_access_token_file: %s holds fewer than 16 characters", o.InitialAccessTokenFile)
		}
	}
	return r, nil
}

// registrationResponse is RFC 7591 §3.2.1's answer.
type registrationResponse struct {
	clientreg.Metadata
	ClientIDIssuedAt int64 `json:"client_id_issued_at"`
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
