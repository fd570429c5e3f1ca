package portcullis

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/doctor"
)

// runDoctor checks a deployment from the outside, the way a connector sees
// it, prints the report and fails when a check fails.
func runDoctor(ctx context.Context, p process) error {
	args, stdout := p.args, p.stdout
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(p.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: portcullis doctor URL [flags]\n\nURL is the MCP endpoint a connector is given, e.g. https://mcp.example.com/mcp.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	var o doctor.Options
	var tokenFile string
	fs.StringVar(&o.Token, "token", "", "bearer `token` for the checks that need a caller (prefer --token-file: arguments are visible to other users)")
	fs.StringVar(&tokenFile, "token-file", "", "read the bearer token from `file`")
	fs.StringVar(&o.Origin, "origin-check-origin", doctor.DefaultOrigin, "an `origin` the server must refuse")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Second, "bound on each request")
	fs.StringVar(&o.MetricsURL, "metrics-url", "", "the server's metrics `URL` (e.g. http://POD:9090/metrics), to report each upstream MCP server's state")
	fs.BoolVar(&o.AllowUnauthenticated, "allow-unauthenticated", false, "report a server without auth as a warning, not a failure")

	// The URL may come before or after the flags.
	parse := func(a []string) error {
		if err := fs.Parse(a); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return usageError{err}
		}
		return nil
	}
	if err := parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{errors.New("missing the MCP URL, e.g. portcullis doctor https://mcp.example.com/mcp")}
	}
	o.URL = fs.Arg(0)
	if err := parse(fs.Args()[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %v", fs.Args())}
	}
	if tokenFile != "" {
		if o.Token != "" {
			return usageError{errors.New("--token and --token-file are exclusive")}
		}
		b, err := readTokenFile(tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		if o.Token = strings.TrimSpace(string(b)); o.Token == "" {
			return fmt.Errorf("--token-file: %s is empty", tokenFile)
		}
	}

	rep := doctor.Run(ctx, o)
	if err := rep.WriteText(stdout); err != nil {
		return err
	}
	if rep.Failed() {
		return errors.New("checks failed (see the report above)")
	}
	return nil
}

// readTokenFile reads a token file, refusing one larger than any token.
func readTokenFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	const maxToken = 64 << 10
	b, err := io.ReadAll(io.LimitReader(f, maxToken+1))
	if err == nil && len(b) > maxToken {
		err = fmt.Errorf("%s is larger than %d bytes: not a token", path, maxToken)
	}
	return b, err
}
