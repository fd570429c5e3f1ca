// Package mcp turns a [tools.Catalog] into an MCP server and serves it.
//
// It is what the portcullis binary and the public package
// github.com/portcullis-mcp/portcullis are built from; its API is not
// covered by their compatibility promise and changes as the server needs.
//
// [New] builds a [Server] from a catalog, the `mcp:` configuration
// ([Options]) and what it is wired to ([Deps]): the official SDK's server
// with the receiving middleware every Portcullis server has (panics become
// error results, a tool the caller may not see answers as an unknown tool
// with a "did you mean" hint, tool calls are bounded by their timeouts,
// task tools run as tasks, and MRTR requestState is sealed with a [Sealer]
// so that clients cannot forge it).
//
// A server is built for one [Transport]. [Server.Handler] serves an [HTTP]
// server on one endpoint for every protocol era: 2026-07-28 and later
// statelessly, 2024-11-05 … 2025-11-25 with the initialize handshake and
// optional sessions. [Server.ServeStdio] serves a [Stdio] server over
// stdin and stdout for local use. The examples build a server each way.
package mcp
