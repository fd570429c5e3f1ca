package authserver

// The enterprise IdPs whose ID-JAGs the token endpoint takes
// (enterprise_idps): their options checked, and each one's signing keys.

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/clientreg"
	"github.com/portcullis-mcp/portcullis/internal/jwks"
)

// validateEnterpriseIdPs checks enterprise_idps; clients are the ids of
// the pre-registered clients.
func (o *Options) validateEnterpriseIdPs(clients map[string]bool) []error {
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	seen := map[string]bool{}
	for i, e := range o.EnterpriseIdPs {
		k := fmt.Sprintf("enterprise_idps[%d]", i)
		switch {
		case e.Issuer == "":
			add(k+".issuer", "required: the issuer identifier the provider's assertions carry in iss")
		case seen[e.Issuer]:
			add(k+".issuer", "duplicate issuer %q", e.Issuer)
		default:
			if err := checkIssuer(e.Issuer, e.AllowHTTP); err != nil {
				add(k+".issuer", "%v", err)
			}
		}
		seen[e.Issuer] = true
		if e.JWKSURL != "" {
			if err := checkFetchURL(e.JWKSURL, e.AllowHTTP); err != nil {
				add(k+".jwks_url", "%v", err)
			}
		}
		for j, c := range e.Clients {
			u, err := url.Parse(c)
			cimd := err == nil && clientreg.IsURLClientID(c, o.ClientMetadataDocuments.InsecureAllowHTTP) && u.Host != ""
			if !clients[c] && !cimd {
				add(fmt.Sprintf("%s.clients[%d]", k, j), "%q is neither a client of authorization_server.clients nor a Client ID Metadata Document URL (https)", c)
			}
		}
		if e.MaxAssertionLifetime <= 0 {
			add(k+".max_assertion_lifetime", "must be positive")
		} else if e.MaxAssertionLifetime > maxAssertionLifetimeCap {
			add(k+".max_assertion_lifetime", "%s is longer than %s: an ID-JAG is short-lived", e.MaxAssertionLifetime, maxAssertionLifetimeCap)
		}
	}
	return errs
}

// enterpriseIdP is a configured enterprise IdP.
type enterpriseIdP struct {
	o EnterpriseIdPOptions
	// mapper maps an assertion's claims to a User as the sign-in maps an
	// ID token's.
	mapper *idp
	// keys are the IdP's signing keys: its JWKS at jwks_url, or at the
	// jwks_uri its discovery document names.
	keys *jwks.Set
}

// jwksRefreshInterval is the least time between two fetches of an
// enterprise IdP's keys, as auth.jwks_refresh_interval's default is for
// the issuers /mcp trusts: forged assertions cost the IdP no fetch each,
// and a key the IdP rotates to is found at most that long after its
// first use.
const jwksRefreshInterval = 10 * time.Second

// jwksMaxAge is how long an enterprise IdP's keys are used before a
// background fetch replaces them, as auth.jwks_max_age's default is for
// the issuers /mcp trusts: a key the IdP removes stops verifying
// assertions within about that long.
const jwksMaxAge = 15 * time.Minute

// newEnterpriseIdPs builds the configured IdPs; client fetches their keys,
// now is the clock, changed is told when fetching an IdP's keys starts
// failing (err) and when it works again (nil).
func newEnterpriseIdPs(opts []EnterpriseIdPOptions, client *http.Client, now func() time.Time, changed func(issuer string, err error)) map[string]*enterpriseIdP {
	out := make(map[string]*enterpriseIdP, len(opts))
	for _, o := range opts {
		out[o.Issuer] = &enterpriseIdP{
			o:      o,
			mapper: &idp{o: IdPOptions{GroupsClaims: o.GroupsClaims}, preset: presets["generic"]},
			keys: jwks.New(jwks.Options{
				Issuer:          o.Issuer,
				URL:             o.JWKSURL,
				CheckURL:        func(u string) error { return checkFetchURL(u, o.AllowHTTP) },
				Client:          client,
				Now:             now,
				RefreshInterval: jwksRefreshInterval,
				MaxAge:          jwksMaxAge,
				Changed:         func(err error, _ int) { changed(o.Issuer, err) },
			}),
		}
	}
	return out
}

const (
	// idjagType is the JOSE typ of an ID-JAG.
	idjagType = "oauth-id-jag+jwt"
	// idjagProfile is the value of authorization_grant_profiles_supported
	// that tells clients this server takes ID-JAGs.
	idjagProfile = "urn:ietf:params:oauth:grant-profile:id-jag"
	// assertionLeeway is the clock skew allowed on exp, iat and nbf.
	assertionLeeway = time.Minute
	// maxAssertionLifetimeCap bounds enterprise_idps[].max_assertion_lifetime.
	maxAssertionLifetimeCap = time.Hour
	// maxAssertionBytes bounds an assertion; an ID-JAG is about 1 KiB.
	maxAssertionBytes = 16 << 10
)
