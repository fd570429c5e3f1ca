package portcullis

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/portcullis-mcp/portcullis/internal/config"
)

const usage = `Usage: portcullis [command] [flags]

Commands:
  serve          serve MCP over Streamable HTTP on /mcp (the default)
  stdio          serve MCP over stdin/stdout (logs go to stderr)
  check-config   validate the configuration, report every problem, and exit
  doctor URL     check a deployment the way a connector sees it (metadata,
                 401 challenge, authorization server, Origin and Mcp-Method
                 checks; with --token, initialize and tools/list)
  version        print the version and exit
  help           print this help

Run "portcullis COMMAND -h" for a command's flags. Every configuration key
can also be set by an environment variable: PORTCULLIS_ followed by the key
path in upper case with dots as underscores (server.listen is
PORTCULLIS_SERVER_LISTEN).
`

// execute runs p's command line: the command, "serve" when none is given,
// with its flags. It returns nil on success and when help was asked for,
// else a [*commandError] that names the command.
func execute(ctx context.Context, p process, ext extensions) error {
	cmd, args := "serve", p.args
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	p.args = args
	var err error
	switch cmd {
	case "serve":
		err = runServe(ctx, p, ext)
	case "stdio":
		err = runStdio(ctx, p, ext)
	case "check-config":
		err = runCheckConfig(p)
	case "doctor":
		err = runDoctor(ctx, p)
	case "version":
		fmt.Fprintln(p.stdout, versionString())
	case "help", "-h", "--help":
		fmt.Fprint(p.stdout, usage)
	default:
		return &commandError{Command: cmd, Err: fmt.Errorf("unknown command %q\n\n%s", cmd, strings.TrimSuffix(usage, "\n")), unknown: true}
	}
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return &commandError{Command: cmd, Err: err}
}

// commandError is a failed command. Its message is what the binary
// prints: one line per problem, so that a bad configuration is fixed in
// one pass.
type commandError struct {
	// Command is the command that failed ("serve", "check-config", …).
	Command string
	// Err is what went wrong.
	Err     error
	unknown bool // Command is not a command
}

func (e *commandError) Error() string {
	if e.unknown {
		return "portcullis: " + e.Err.Error()
	}
	var ue usageError
	if errors.As(e.Err, &ue) {
		return fmt.Sprintf("portcullis %s: %v", e.Command, ue.err)
	}
	problems := unjoin(e.Err)
	if len(problems) == 1 {
		return fmt.Sprintf("portcullis %s: %v", e.Command, problems[0])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "portcullis %s: %d problems:", e.Command, len(problems))
	for _, p := range problems {
		fmt.Fprintf(&b, "\n  - %v", p)
	}
	return b.String()
}

func (e *commandError) Unwrap() error { return e.Err }

// exitCode is the exit status for err as [execute] returns it: 0 for nil,
// 2 for a usage error (an unknown command, a bad flag), 1 for any other.
func exitCode(err error) int {
	var e *commandError
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e) && e.unknown, errors.As(err, &ue):
		return 2
	default:
		return 1
	}
}

func runCheckConfig(p process) error {
	f := newFlags("check-config", p.stderr, true)
	keys := f.fs.Bool("keys", false, "list every configuration key and its environment variable, and exit")
	if err := f.parse(p.args); err != nil {
		return err
	}
	if *keys {
		for _, k := range config.Keys(&configFile{}, envPrefix) {
			fmt.Fprintf(p.stdout, "%-45s %s\n", k.Path, k.Env)
		}
		return nil
	}
	if _, err := loadConfig(f.configPath, p.environ, f); err != nil {
		return err
	}
	fmt.Fprintln(p.stdout, "configuration OK")
	return nil
}
