package portcullis

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/tasks"
	"github.com/portcullis-mcp/portcullis/tools"
)

// An Option adds to the server or changes how [Main] and [Run] run it.
// The nil Option does nothing.
type Option func(*settings)

// settings is what the options set. Its zero value, after newSettings, is
// the portcullis binary.
type settings struct {
	ext               extensions
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

// process is the process a command runs as, with args its command line.
func (s *settings) process(args []string) process {
	return process{args: args, environ: s.environ, stdin: s.stdin, stdout: s.stdout, stderr: s.stderr}
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

// TaskMode says how a [TaskTool]'s calls run as tasks (the MCP tasks
// extension, io.modelcontextprotocol/tasks): combine [TaskOptional] or
// [TaskRequired] with [TaskStartedByHandler] if the handler starts the task.
type TaskMode int

const (
	// TaskOptional: a call from a client that declared the tasks extension
	// is answered at once with a task handle and runs in the background;
	// the client polls tasks/get for its result. Other clients' calls run
	// as plain calls.
	TaskOptional TaskMode = 1 << iota
	// TaskRequired: only clients that declared the tasks extension may
	// call the tool; others get error -32021 naming the extension.
	TaskRequired
	// TaskStartedByHandler: the call stays a plain call (it may ask for
	// input with multi-round-trip results) until the handler calls
	// [StartTask], which answers with the task handle.
	TaskStartedByHandler
)

// TaskTool adds a tool, as [Tool] does, whose calls run as tasks for the
// clients that support them: a rollout, a migration, an approval — work
// that outlasts an HTTP request. Unless mode has [TaskStartedByHandler],
// the whole handler runs as the task: its context ends when the client
// cancels the task (tasks/cancel) or when the task outlives tasks.ttl; an
// error result completes the task with isError, a *jsonrpc.Error fails it;
// a result with InputRequests parks the task in input_required until the
// client answers with tasks/update, and the handler is called again with
// the answers in req.Params.InputResponses (each key asked once). With
// tasks.store redis, any replica answers for the task and its result
// survives the replica that produced it.
func TaskTool[In, Out any](t *sdk.Tool, h sdk.ToolHandlerFor[In, Out], mode TaskMode) Option {
	tt := tasks.ToolTasks{Support: tasks.SupportOptional, HandlerStarts: mode&TaskStartedByHandler != 0}
	if mode&TaskRequired != 0 {
		tt.Support = tasks.SupportRequired
	}
	return func(s *settings) {
		s.register(func(c *tools.Catalog) error {
			tools.AddTaskTool(c, t, h, tt)
			return nil
		})
	}
}

// StartTask, called by the handler of a [TaskTool] with
// [TaskStartedByHandler], runs f as the call's task and returns at once
// with a placeholder result that the client receives as the task handle;
// f's result becomes the task's. Where the call cannot become a task (the
// client does not support tasks, or the handler is already running as
// one), StartTask runs f and returns what it returns.
func StartTask(ctx context.Context, f func(ctx context.Context) (*sdk.CallToolResult, error)) (*sdk.CallToolResult, error) {
	return tasks.Run(ctx, f)
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
			if err := inner.ext.apply(c); err != nil {
				return fmt.Errorf("toolset %s: %w", name, err)
			}
			return nil
		})
	}
}

// ServerTools adds the tools of opts, as [Toolset] does, and exposes each
// of them on the virtual server named server (an entry of the
// configuration's servers list) as well as on /mcp: a team's program adds
// its tools to its own connector. The configuration can curate them there
// further (a selection of source "program" naming the tool). A server the
// configuration does not have stops the server from starting.
func ServerTools(server string, opts ...Option) Option {
	return func(s *settings) {
		inner := &settings{}
		for _, o := range opts {
			if o != nil {
				o(inner)
			}
		}
		if s.ext.servers == nil {
			s.ext.servers = &serverTools{names: map[string][]string{}}
		}
		st := s.ext.servers
		s.register(func(c *tools.Catalog) error {
			before := c.ToolNames()
			if err := inner.ext.apply(c); err != nil {
				return fmt.Errorf("server %s: %w", server, err)
			}
			for _, name := range c.ToolNames() {
				if !slices.Contains(before, name) {
					st.add(server, name)
				}
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
