// Package mcp turns a [tools.Catalog] into an MCP server and serves it.
//
// It is what the portcullis binary and the public package
// github.com/portcullis-mcp/portcullis are built from; its API is not
// covered by their compatibility promise and changes as the server needs.
//
// [NewServer] builds the official SDK's server from the catalog and adds the
// receiving middleware every Portcullis server has: panics become error
// results, an unknown tool name gets a "did you mean" hint, and MRTR
// requestState is sealed with a [Sealer] so that clients cannot forge it.
//
// [NewHandler] serves that server on one HTTP endpoint for every protocol
// era: 2026-07-28 and later statelessly, 2024-11-05 … 2025-11-25 with the
// initialize handshake and optional sessions. [ServeStdio] serves it over
// stdin and stdout for local use.
//
// The examples of [NewHandler] and [ServeStdio] build a server from a
// catalog and serve it each way. The zero [Options] serves with the
// documented defaults.
package mcp
