//go:build e2e

package redissession

import (
	"errors"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/rediskit"
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
	a := NewStore(kit(client), "test:")
	b := NewStore(kit(srv.Client(t)), "test:") // another replica
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

// TestRedisSessionStoreWaitsForReplicas: a record is written as the kit's
// durability says. Asked for a replica's acknowledgement on a server that
// has none, a Put fails with rediskit.ErrUnavailable, so that the
// initialize fails rather than make a session a failover could lose;
// asking none, it succeeds.
func TestRedisSessionStoreWaitsForReplicas(t *testing.T) {
	client := redistest.Start(t).Client(t)
	rec := sharedsession.Record{ProtocolVersion: "2025-11-25", Initialize: &sdk.InitializeParams{ProtocolVersion: "2025-11-25"}}
	for _, tt := range []struct {
		name     string
		replicas int
		wantErr  error
	}{
		{name: "one replica asked", replicas: 1, wantErr: rediskit.ErrUnavailable},
		{name: "none asked", replicas: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore(rediskit.New(client, rediskit.Durability{Replicas: tt.replicas, Timeout: 100 * time.Millisecond}), "test:")
			err := s.Put(t.Context(), sharedsession.Key(tt.name), rec, time.Minute)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Put = %v, want %v", err, tt.wantErr)
			}
		})
	}
}
