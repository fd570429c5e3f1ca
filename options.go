package portcullis

import (
	"fmt"
	"io"
	"os"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/server"
	"github.com/portcullis-mcp/portcullis/tools"
)

// An Option adds to the server or changes how [Main] and [Run] run it.
// The nil Option does nothing.
type Option func(*settings)

// settings is what the options set. Its zero value, after newSettings, is
// the portcullis binary.
type settings struct {
	ext               server.Extensions
	environ           []string
	stdin             io.Reader
	stdout, stderr    io.Writer
	environSet, ioSet bool
}

func newSettings(opts []Option) *settings {
	s := &settings{}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	if !s.environSet {
		s.environ = os.Environ()
	}
	if !s.ioSet {
		s.stdin, s.stdout, s.stderr = os.Stdin, os.Stdout, os.Stderr
	}
	return s
}

// register adds f to what runs on the catalog.
func (s *settings) register(f func(*tools.Catalog) error) {
	s.ext.Register = append(s.ext.Register, f)
}

// Tool adds a tool with a typed handler, as the SDK's [sdk.AddTool] does:
// the SDK derives the input and output schemas it is not given from In and
// Out (describe each field with a `jsonschema` tag) and validates the
// arguments before h runs. The tool is served next to the toolsets the
// configuration enables, and auth.policy guards it by name like any other.
// A tool whose name is already taken stops the server from starting.
//
// Read the caller's verified identity in h with [Caller].
func Tool[In, Out any](t *sdk.Tool, h sdk.ToolHandlerFor[In, Out]) Option {
	return func(s *settings) {
		s.register(func(c *tools.Catalog) error {
			tools.AddTool(c, t, h)
			return nil
		})
	}
}

// Resource adds a resource and the handler that reads it.
func Resource(r *sdk.Resource, h sdk.ResourceHandler) Option {
	return func(s *settings) {
		s.register(func(c *tools.Catalog) error {
			c.AddResource(r, h)
			return nil
		})
	}
}

// Prompt adds a prompt and the handler that renders it.
func Prompt(p *sdk.Prompt, h sdk.PromptHandler) Option {
	return func(s *settings) {
		s.register(func(c *tools.Catalog) error {
			c.AddPrompt(p, h)
			return nil
		})
	}
}

// Toolset groups options under one name, so that a team can hand out its
// tools, resources and prompts as one value:
//
//	func Billing() portcullis.Option {
//		return portcullis.Toolset("billing",
//			portcullis.Tool(invoiceTool, getInvoice),
//			portcullis.Tool(refundTool, refund),
//		)
//	}
//
// A problem adding one of them (a tool name already taken) names the
// toolset. The tools are always served: the configuration's
// tools.toolsets selects among the built-in toolsets only.
func Toolset(name string, opts ...Option) Option {
	return func(s *settings) {
		inner := &settings{}
		for _, o := range opts {
			if o != nil {
				o(inner)
			}
		}
		s.register(func(c *tools.Catalog) error {
			if err := inner.ext.Apply(c); err != nil {
				return fmt.Errorf("toolset %s: %w", name, err)
			}
			return nil
		})
	}
}

// Catalog runs f on the catalog the server is built from, after the
// configured toolsets and the options before it are added: a way to add
// tools with [tools.AddTool] from code that builds them at start (from a
// file or a service description). An error from f stops the server from
// starting.
func Catalog(f func(*tools.Catalog) error) Option {
	return func(s *settings) { s.register(f) }
}

// Environ makes [Run] read the configuration's PORTCULLIS_* variables (and
// OTEL_*, GOGC, …) from env, entries of the form KEY=VALUE, instead of the
// process environment. Tests use it to run with a known environment.
func Environ(env []string) Option {
	return func(s *settings) { s.environ, s.environSet = env, true }
}

// Streams makes [Run] use stdin, stdout and stderr instead of the
// process's: stdio serves MCP on stdin and stdout, the dev banner and
// command output go to stdout, logs go to stderr. A nil reader reads
// nothing; a nil writer discards.
func Streams(stdin io.Reader, stdout, stderr io.Writer) Option {
	return func(s *settings) {
		if stdin == nil {
			stdin = eofReader{}
		}
		if stdout == nil {
			stdout = io.Discard
		}
		if stderr == nil {
			stderr = io.Discard
		}
		s.stdin, s.stdout, s.stderr, s.ioSet = stdin, stdout, stderr, true
	}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
