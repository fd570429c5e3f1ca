package portcullis

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/portcullis-mcp/portcullis/internal/config"
)

// Set by the linker: -ldflags "-X github.com/portcullis-mcp/portcullis.version=…"
// and the same for revision (see the Makefile's LDFLAGS), and sdkPatches
// to the names of the patches/go-sdk patches the binary was built with
// (make build, scripts/sdk-patch.sh).
var (
	version    = "dev"
	revision   = ""
	sdkPatches = ""
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

// process is what a command runs with: its command line (the program
// name excluded), the environment (KEY=VALUE entries) and the standard
// streams. Commands read the environment through it alone.
type process struct {
	args           []string
	environ        []string
	stdin          io.Reader
	stdout, stderr io.Writer
}

// getenv returns the value of key in the process environment, "" if unset
// (the last entry wins, as in the os package).
func (p process) getenv(key string) string {
	v := ""
	for _, kv := range p.environ {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

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

type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }

func versionString() string {
	sdk := "go-sdk " + sdkVersion()
	if sdkPatches != "" {
		sdk += " patched: " + sdkPatches
	}
	return fmt.Sprintf("portcullis %s (revision %s, %s, %s)", version, revisionString(), runtime.Version(), sdk)
}

// sdkVersion is the version of the MCP Go SDK in the build info.
func sdkVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/modelcontextprotocol/go-sdk" {
				return d.Version
			}
		}
	}
	return "unknown"
}

// revisionString is the VCS revision: stamped by the linker, else read from
// the build info, else "unknown".
func revisionString() string {
	rev := revision
	if rev == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					rev = s.Value
				}
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	return rev
}

// commonFlags are the flags every command that loads configuration takes.
type commonFlags struct {
	fs         *flag.FlagSet
	configPath string
	listen     string
	metrics    string
	dev        bool
}

func newFlags(name string, stderr io.Writer, serving bool) *commonFlags {
	f := &commonFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	f.fs.SetOutput(stderr)
	f.fs.StringVar(&f.configPath, "config", "", "configuration `file` (YAML)")
	if serving {
		f.fs.StringVar(&f.listen, "listen", "", "MCP listen `address` (overrides server.listen)")
		f.fs.StringVar(&f.metrics, "metrics-listen", "", "metrics listen `address` (overrides server.metrics_listen)")
		f.fs.BoolVar(&f.dev, "dev", false, "development mode: loopback only, a per-process request-state key")
	}
	return f
}

func (f *commonFlags) parse(args []string) error {
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if f.fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %v", f.fs.Args())}
	}
	return nil
}

func (f *commonFlags) apply(c *configFile) {
	if f.listen != "" {
		c.Server.Listen = f.listen
	}
	if f.metrics != "" {
		c.Server.MetricsListen = f.metrics
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
