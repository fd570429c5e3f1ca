// Package redissession keeps shared legacy sessions
// ([sharedsession.Backend]) in Redis (one server, Sentinel or Cluster),
// so that every replica serves every session:
//
//	shared := redissession.New(rediskit.New(client, durability), "portcullis:")
//
// Every key is under the prefix and holds a session's [sharedsession.Key],
// never its id: a session's record ([Store]), its event streams ([Log]);
// and the replicas talk on one Pub/Sub channel ([Bus]). Errors of Redis
// are [rediskit.ErrUnavailable].
package redissession

import (
	"github.com/portcullis-mcp/portcullis/internal/rediskit"
	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// New returns the store, log and bus of shared sessions in kit's Redis,
// under prefix (such as "portcullis:"). Writes of records wait for
// replicas as kit says.
func New(kit *rediskit.Client, prefix string) sharedsession.Backend {
	return sharedsession.Backend{Store: NewStore(kit, prefix), Log: NewLog(kit, prefix), Bus: NewBus(kit, prefix)}
}
