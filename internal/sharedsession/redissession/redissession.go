// Package redissession keeps shared legacy sessions
// ([sharedsession.Backend]) in Redis (one server, Sentinel or Cluster),
// so that every replica serves every session:
//
//	shared := redissession.New(client, "portcullis:")
//
// Every key is under the prefix and holds a session's [sharedsession.Key],
// never its id: a session's record ([Store]), its event streams ([Log]);
// and the replicas talk on one Pub/Sub channel ([Bus]).
package redissession

import (
	"github.com/redis/go-redis/v9"

	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// New returns the store, log and bus of shared sessions in client, under
// prefix (such as "portcullis:"). The client belongs to the caller.
func New(client redis.UniversalClient, prefix string) sharedsession.Backend {
	return sharedsession.Backend{Store: NewStore(client, prefix), Log: NewLog(client, prefix), Bus: NewBus(client, prefix)}
}
