// Command portcullis serves MCP tools, resources and prompts over Streamable
// HTTP or stdio. Run "portcullis help" for its subcommands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// Until server.allow_pprof serves a heap profile, nothing reads memory
	// profiling's samples (see setMemProfiling).
	setMemProfiling(false)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
