//go:build e2e

package mcp

import (
	"net/http"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
	"github.com/portcullis-mcp/portcullis/internal/rediskit"
	"github.com/portcullis-mcp/portcullis/internal/redistest"
	"github.com/portcullis-mcp/portcullis/internal/sharedsession/redissession"
)

// TestSharedHandlerCloseEndsRedisSubscription shares sessions through a
// real Redis: once started, the handler subscribes to the bus channel
// (PUBSUB NUMSUB counts it), and once closed, after serving a session, it
// does not, though the Redis client it was given stays open.
func TestSharedHandlerCloseEndsRedisSubscription(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	const channel = "test:session-events"
	h := endpoint{deps: Deps{SharedSessions: redissession.New(rediskit.New(client, rediskit.Durability{}), "test:")}}.handler(t)
	subscribers := func() int64 {
		t.Helper()
		n, err := client.PubSubNumSub(t.Context(), channel).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n[channel]
	}
	if n := subscribers(); n != 1 {
		t.Fatalf("%d subscribers to %s once the handler started, want 1", n, channel)
	}
	r := postTo(t, h, legacyInit, nil)
	id := r.header.Get(mcpheader.SessionID)
	if r.status != http.StatusOK || id == "" {
		t.Fatalf("initialize: status %d, session %q: %s", r.status, id, r.body)
	}
	if r := postTo(t, h, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, map[string]string{mcpheader.SessionID: id, mcpheader.ProtocolVersion: "2025-06-18"}); r.status != http.StatusOK {
		t.Fatalf("ping: status %d: %s", r.status, r.body)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	// Redis drops a subscription as it sees its connection close: poll a
	// real process, with a deadline.
	for deadline := time.Now().Add(10 * time.Second); subscribers() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d subscribers to %s 10s after the handler closed, want 0", subscribers(), channel)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := client.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("the client given to the handler: %v", err)
	}
}
