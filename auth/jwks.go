package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/portcullis-mcp/portcullis/internal/jwks"
)

// keySet is the [oidc.KeySet] of an issuer /mcp trusts: its remote JWKS,
// cached by [jwks.Set] (refreshed on an unknown kid at most once per
// jwks_refresh_interval, in the background after jwks_max_age, kept while
// the issuer is down), with the refusals classified as auth's reasons.
//
// Whether the issuer answers is logged once per change: the first failed
// fetch (at start, on an unknown kid, in the background, or for
// readiness) as a warning with the issuer and the error, then the first
// fetch that works again; not once per request or probe.
type keySet struct {
	issuer string
	set    *jwks.Set
	logger *slog.Logger
}

// newKeySet returns the key set of issuer; logger nil means no logging.
func newKeySet(issuer, jwksURL string, allowHTTP bool, client *http.Client, now func() time.Time, interval, maxAge time.Duration, logger *slog.Logger) *keySet {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	k := &keySet{issuer: issuer, logger: logger}
	k.set = jwks.New(jwks.Options{
		Issuer:          issuer,
		URL:             jwksURL,
		CheckURL:        func(u string) error { return checkURL(u, allowHTTP) },
		Client:          client,
		Now:             now,
		RefreshInterval: interval,
		MaxAge:          maxAge,
		Changed:         k.logChange,
	})
	return k
}

// VerifySignature implements [oidc.KeySet]. Its errors are *Error with
// ReasonUnknownKey or ReasonBadSignature; go-oidc flattens them to text, so
// the reason is also recorded in the reasonSlot of ctx, if any.
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	payload, err := k.verify(ctx, raw)
	if err != nil {
		noteReason(ctx, err)
	}
	return payload, err
}

func (k *keySet) verify(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, joseAlgs)
	if err != nil {
		return nil, fail(ReasonMalformed, "parsing jwt: %v", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, fail(ReasonMalformed, "want one signature, got %d", len(jws.Signatures))
	}
	payload, err := k.set.Verify(ctx, jws)
	switch {
	case err == nil:
		return payload, nil
	case errors.Is(err, jwks.ErrBadSignature):
		return nil, fail(ReasonBadSignature, "signature does not verify")
	default: // not held, even after a refresh, or the refresh failed
		return nil, fail(ReasonUnknownKey, "key %q: %v", jws.Signatures[0].Header.KeyID, err)
	}
}

// maxLoggedError bounds the error text logged for a failed fetch, which
// may quote the IdP's answer.
const maxLoggedError = 500

// logChange logs that fetching the issuer's keys started failing (err)
// or works again (err nil).
func (k *keySet) logChange(err error, held int) {
	if err == nil {
		k.logger.Info("auth: issuer keys fetched again", "issuer", k.issuer, "keys", held)
		return
	}
	msg := err.Error()
	if len(msg) > maxLoggedError {
		msg = msg[:maxLoggedError] + "…"
	}
	k.logger.Warn("auth: issuer unreachable: cannot fetch its keys; tokens with keys already held still verify", "issuer", k.issuer, "error", msg, "keys_held", held)
}

// Ready reports whether keys are loaded, trying one (rate-limited, bounded)
// fetch when they are not.
func (k *keySet) Ready(ctx context.Context) error {
	if err := k.set.Ready(ctx); err != nil {
		return fmt.Errorf("auth: no keys loaded: %w", err) // err names the issuer
	}
	return nil
}

// joseAlgs are the algorithms the key set parses; the issuer's allow-list is
// enforced earlier by go-oidc and by the header check.
var joseAlgs = func() []jose.SignatureAlgorithm {
	out := make([]jose.SignatureAlgorithm, len(asymmetricAlgs))
	for i, a := range asymmetricAlgs {
		out[i] = jose.SignatureAlgorithm(a)
	}
	return out
}()

// reasonSlot carries the reason a key set refused a token through go-oidc,
// which flattens key-set errors to text.
type reasonSlot struct{ reason Reason }

type reasonSlotKey struct{}

func noteReason(ctx context.Context, err error) {
	if s, ok := ctx.Value(reasonSlotKey{}).(*reasonSlot); ok {
		s.reason = ReasonOf(err)
	}
}

// staticKeySet adapts any oidc.KeySet (e.g. the dev issuer's) so its
// failures are classified as bad signatures.
type staticKeySet struct{ oidc.KeySet }

func (s staticKeySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	p, err := s.KeySet.VerifySignature(ctx, raw)
	if err != nil {
		err = &Error{Reason: ReasonBadSignature, Err: err}
		noteReason(ctx, err)
	}
	return p, err
}
