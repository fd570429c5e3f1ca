//go:build e2e

package authserver

import (
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/redistest"
)

// TestRedisKV runs the KV contract against a real redis-server.
func TestRedisKV(t *testing.T) {
	srv := redistest.Start(t)
	testKV(t, NewRedisKV(srv.Client(t), "test:as:"), time.Sleep)
}
