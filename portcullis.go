// Package portcullis serves your own typed MCP tools with all of Portcullis
// around them: OIDC bearer-token auth and per-tool policy, limits, the
// 2025-11-25 and 2026-07-28 protocol eras on one endpoint, stdio, metrics,
// traces, audit logs, health endpoints and graceful draining.
//
// A program built on it is the portcullis binary plus its own tools: it
// takes the same commands (serve, stdio, check-config, doctor, version),
// flags, configuration file and PORTCULLIS_* variables, so the Helm chart
// deploys its image unchanged. The portcullis binary itself is
// [Main] with no options.
//
//	type GreetIn struct {
//		Name string `json:"name" jsonschema:"Who to greet."`
//	}
//
//	type GreetOut struct {
//		Greeting string `json:"greeting" jsonschema:"The greeting."`
//	}
//
//	func greet(ctx context.Context, req *mcp.CallToolRequest, in GreetIn) (*mcp.CallToolResult, GreetOut, error) {
//		who := in.Name
//		if p, ok := portcullis.Caller(req); ok && who == "" {
//			who = p.Subject // the verified token's subject
//		}
//		return nil, GreetOut{Greeting: "Hello, " + who}, nil
//	}
//
//	func main() {
//		portcullis.Main(
//			portcullis.Tool(&mcp.Tool{Name: "greet", Description: "Greets someone by name."}, greet),
//		)
//	}
//
// Here mcp is the official SDK, github.com/modelcontextprotocol/go-sdk/mcp.
// [Tool] takes the SDK's typed handler: the SDK derives the input and output
// schemas from the structs and validates arguments before the handler runs.
// A tool that fails returns an error, which the model reads as an error
// result: say what went wrong and what to do about it.
//
// Run it with `go run . serve --dev`: dev mode prints a token for the
// embedded issuer. In production, configure auth as for the binary (see its
// sign-in page, docs/sign-in.md); tools that auth.policy names are guarded
// like the built-in ones.
//
// # Compatibility
//
// This package is at v0. Additions may come in any commit. An incompatible
// change to an exported name (removed, or with another signature) is made
// only on purpose: CI (make api-check) compares the API with the commit
// recorded in api/base and fails on such a change until that record moves,
// in a commit that says why; at each release the record moves to the
// release. The command line, configuration keys and PORTCULLIS_* variables
// are the binary's and change only as the binary's do.
//
// Two packages this one hands you types from are stable in the same sense
// and checked the same way: [github.com/portcullis-mcp/portcullis/auth]
// (the [Principal]) and [github.com/portcullis-mcp/portcullis/tools] (the
// [tools.Catalog]). The SDK's mcp package follows the SDK's own versions.
// The packages mcp, observability and upstream of this module are what the
// server is built from, not part of this promise: no API check covers them
// and their exported names change as the server needs, so import them only
// if you accept that. Nothing under internal/ is for use outside this
// module.
package portcullis

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main runs the program the way the portcullis binary does and exits: it
// reads the command line and environment of the process, stops serving
// (draining first) on SIGINT or SIGTERM, reports a failure on stderr and
// exits 0 on success, 1 on failure, 2 on a usage error. Call it from main.
func Main(opts ...Option) {
	// Until server.allow_pprof serves a heap profile, nothing reads memory
	// profiling's samples.
	setMemProfiling(false)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	s := newSettings(opts)
	err := execute(ctx, s.process(os.Args[1:]), s.ext)
	stop()
	if err != nil {
		fmt.Fprintln(s.stderr, err)
	}
	os.Exit(exitCode(err))
}

// Run runs one command line, args without the program name (["serve",
// "--dev"]; no command means serve), until it is done or ctx ends; serve
// and stdio then drain and return. It reads the environment and standard
// streams of the process unless [Environ] or [Streams] say otherwise.
//
// serve owns the process as the binary does: it sets the Go runtime's
// memory limit and garbage-collector target unless GOMEMLIMIT and GOGC are
// set (see docs/operations.md), and installs
// OpenTelemetry's error handler. Run one serve per process.
//
// Run returns nil on success and when help was asked for. Otherwise its
// error says what went wrong, one line per problem, as the binary prints
// it; [ExitCode] gives the binary's exit status for it. Run does not print
// the error.
func Run(ctx context.Context, args []string, opts ...Option) error {
	s := newSettings(opts)
	return execute(ctx, s.process(args), s.ext)
}

// ExitCode is the exit status the binary uses for err as [Run] returns it:
// 0 for nil, 2 for a usage error (an unknown command, a bad flag), 1 for
// any other.
func ExitCode(err error) int { return exitCode(err) }
