package portcullis

import (
	"context"

	"github.com/portcullis-mcp/portcullis/mcp"
)

// runStdio serves MCP on the process's stdin and stdout until stdin ends
// or ctx does; logs go to stderr.
func runStdio(ctx context.Context, p process, ext extensions) error {
	f := newFlags("stdio", p.stderr, false)
	if err := f.parse(p.args); err != nil {
		return err
	}
	cfg, err := loadConfig(f.configPath, p.environ, nil)
	if err != nil {
		return err
	}
	// stdio has no token: the policy hides the tools it guards, unless the
	// operator opts out (see newApp).
	a, err := newApp(ctx, cfg, mcp.Stdio, ext, p)
	if err != nil {
		return err
	}
	defer a.shutdownTracing()
	defer a.audit.close(a.logger)
	defer a.stopUpstreams()
	if cfg.Auth.AllowStdioAllTools {
		a.logger.Warn("auth.allow_stdio_all_tools is on: stdio lists and calls every tool, including those auth.policy guards")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go a.catalog.Run(ctx, a.server.SDK())
	a.logger.Info("serving MCP on stdio", "version", version)
	return a.server.ServeStdio(ctx, p.stdin, p.stdout)
}
