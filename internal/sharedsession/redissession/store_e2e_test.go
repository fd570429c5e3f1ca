//go:build e2e

package redissession

import (
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/redistest"
	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// TestRedisSessionStore writes, reads, refreshes and deletes a session
// record in a real Redis, and checks that the key holds neither the id
// nor anything but the record.
func TestRedisSessionStore(t *testing.T) {
	ctx := t.Context()
	srv := redistest.Start(t)
	client := srv.Client(t)
	a := NewStore(client, "test:")
	b := NewStore(srv.Client(t), "test:") // another replica
	const id = "sEsSiOnIdThAtMuStNoTlEaK"
	key := sharedsession.Key(id)
	rec := sharedsession.Record{
		Principal:       sharedsession.PrincipalHash("issuer|alice|client"),
		ProtocolVersion: "2025-11-25",
		Initialize:      &sdk.InitializeParams{ProtocolVersion: "2025-11-25", ClientInfo: &sdk.Implementation{Name: "c", Version: "1"}, Capabilities: &sdk.ClientCapabilities{}},
		LogLevel:        "info",
	}
	if _, ok, err := b.Get(ctx, key, time.Minute); ok || err != nil {
		t.Fatalf("Get before Put: ok %v, err %v", ok, err)
	}
	if err := a.Put(ctx, key, rec, time.Second); err != nil {
		t.Fatal(err)
	}
	got, ok, err := b.Get(ctx, key, time.Hour)
	if err != nil || !ok {
		t.Fatalf("Get on the other replica: ok %v, err %v", ok, err)
	}
	if got.Principal != rec.Principal || got.ProtocolVersion != rec.ProtocolVersion || got.LogLevel != rec.LogLevel || got.Initialize.ClientInfo.Name != "c" {
		t.Errorf("record %+v, want %+v", got, rec)
	}
	keys, err := client.Keys(ctx, "test:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := "test:session:" + key
	if len(keys) != 1 || keys[0] != want {
		t.Fatalf("keys %v, want [%s]", keys, want)
	}
	if ttl := client.PTTL(ctx, want).Val(); ttl < 59*time.Minute {
		t.Errorf("TTL after Get = %v, want the hour Get set", ttl)
	}
	raw := client.Get(ctx, want).Val()
	if strings.Contains(raw, id) || strings.Contains(raw, "alice") {
		t.Errorf("stored record %s holds the session id or the principal", raw)
	}
	if err := b.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.Get(ctx, key, time.Minute); ok || err != nil {
		t.Fatalf("Get after Delete: ok %v, err %v", ok, err)
	}
}
