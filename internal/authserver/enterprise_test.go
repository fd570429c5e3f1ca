package authserver

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/portcullis-mcp/portcullis/internal/jwks"
	"github.com/portcullis-mcp/portcullis/internal/oidctest"
)

// TestEnterpriseIdPKeysHaveAMaximumAge: an enterprise IdP's keys are
// fetched again in the background once they are jwksMaxAge old, as the
// keys of the issuers /mcp trusts are after auth.jwks_max_age, so a key
// the IdP removed stops verifying assertions; before that age they are
// not fetched again. The clock is the one the server gives.
func TestEnterpriseIdPKeysHaveAMaximumAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		old, next := oidctest.NewECKey("ent-1"), oidctest.NewECKey("ent-2")
		is := oidctest.New(oidctest.Options{URL: "https://idp.example.com", Keys: []*oidctest.Key{old}})
		clock := &fakeClock{t: time.Now()}
		idps := newEnterpriseIdPs([]EnterpriseIdPOptions{{Issuer: is.URL()}}, is.Client(), clock.now, func(string, error) {})
		e := idps[is.URL()]
		verify := func(k *oidctest.Key) error {
			t.Helper()
			jws, err := jose.ParseSignedCompact(k.Sign(map[string]any{"iss": is.URL()}, oidctest.Type(idjagType)), assertionAlgs)
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.keys.Verify(context.Background(), jws)
			return err
		}
		if err := verify(old); err != nil {
			t.Fatalf("first assertion: %v", err)
		}
		is.SetKeys(next) // the IdP rotates the old key out

		clock.add(jwksMaxAge - time.Second)
		if err := verify(old); err != nil {
			t.Fatalf("the old key within the maximum age: %v", err)
		}
		synctest.Wait()
		if n := is.JWKSFetches(); n != 1 {
			t.Fatalf("%d key set fetches within the maximum age, want 1", n)
		}

		clock.add(2 * time.Second)
		if err := verify(old); err != nil {
			t.Fatalf("the old key verifies while the background fetch runs: %v", err)
		}
		synctest.Wait()
		if n := is.JWKSFetches(); n != 2 {
			t.Fatalf("%d key set fetches past the maximum age, want 2", n)
		}
		if err := verify(old); !errors.Is(err, jwks.ErrUnknownKey) {
			t.Errorf("the removed key after the background fetch: %v, want jwks.ErrUnknownKey", err)
		}
		if err := verify(next); err != nil {
			t.Errorf("the IdP's new key: %v", err)
		}
	})
}
