// Package sharedsession holds what the replicas of a deployment share of
// legacy (2024-11-05 … 2025-11-25) MCP sessions, so that any replica serves
// any request of a session: the record of each session ([Store]), the log
// of each session's event streams ([Log]), and the bus on which replicas
// tell each other what happened to a session ([Bus]). [Backend] names the
// three; the mcp package serves sessions through them.
//
// This package has the interfaces and their implementations in process
// memory, for tests and for replicas that share a process; the Redis ones
// are in internal/sharedsession/redissession.
//
// Everything is filed under [Key] of a session's id, never the id itself,
// which a caller could present: the mcp package hashes the id once per
// request and passes the key.
package sharedsession

import "github.com/portcullis-mcp/portcullis/internal/rediskit"

// Backend is where replicas share legacy sessions.
type Backend struct {
	// Store holds the sessions' records. Nil: sessions are not shared.
	Store Store
	// Log holds the sessions' event streams. Nil: a [MemoryLog] of this
	// process.
	Log Log
	// Bus carries messages between replicas. Nil: a [MemoryBus] of this
	// process.
	Bus Bus
}

// Key is the key a session with id is filed under: [rediskit.Hash] of
// the id, so that no store holds an id a caller could present.
func Key(id string) string { return rediskit.Hash(id) }

// PrincipalHash is the [Record.Principal] of a caller with the limits key
// key: [rediskit.Hash] of it, so that no store holds a caller's issuer
// and subject; empty for the empty key.
func PrincipalHash(key string) string {
	if key == "" {
		return ""
	}
	return rediskit.Hash(key)
}
