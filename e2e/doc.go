// Package e2e holds the end-to-end tests: they build the real portcullis
// binary once, run it as a separate process on 127.0.0.1:0, and drive it
// with real clients — plain HTTP (as curl would), the official Go SDK over
// stdio, the MCP conformance suite and the MCP Inspector. TestHelloToolsExample
// does the same for examples/hello-tools, a server built on the public API.
//
// The Node tools are installed by `make tools` (scripts/install-node-tools.sh)
// into $PORTCULLIS_NODE_TOOLS, by default <repo>/.cache/node-tools. A test
// that needs one fails, never skips, when it is missing.
//
// The tests carry the build tag e2e, so plain `go test ./...` (the fast
// loop, Go only) leaves them out; `make test` and `make e2e` run them with
// -tags e2e.
//
// Set PORTCULLIS_E2E_BINARY to test a binary built elsewhere instead of
// building ./cmd/server.
package e2e
