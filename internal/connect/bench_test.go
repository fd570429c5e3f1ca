package connect

import (
	"context"
	"golang.org/x/oauth2"
	"testing"
)

// BenchmarkToken measures what a call on a connected account asks of the
// service: the caller's token from this replica's memory, and how often
// the vault is read (vault-reads/op: once per token lifetime, so about
// 0 per call).
func BenchmarkToken(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	o := owner("alice")
	if err := e.svc.o.Vault.Put(ctx, "saas", o, entryOf(&oauth2.Token{AccessToken: "at-alice", ExpiresIn: 3600}, e.saas.issuer, e.now, e.now)); err != nil {
		b.Fatal(err)
	}
	before := e.store.vaultReads()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.svc.Token(ctx, "saas", o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(e.store.vaultReads()-before)/float64(b.N), "vault-reads/op")
}
