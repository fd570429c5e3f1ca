package catalog

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/curation"
	"github.com/portcullis-mcp/portcullis/tasks"
)

// Catalog is the set of tools, resources, resource templates and prompts
// built from [Options]. Build it once with [New]; then, for every server,
// call [Catalog.Apply] on the server options, [Catalog.Register] on the
// server and, if the server lives long enough, [Catalog.Run].
type Catalog struct {
	tools     []Tool
	resources []resource
	templates []resourceTemplate
	prompts   []prompt

	// completions maps a completion reference ("ref/prompt name" or
	// "ref/resource uri-template") and an argument name to the values
	// offered for it.
	completions map[completionKey][]string
	// subscriptions is whether clients may subscribe to resource updates.
	subscriptions bool
	// watchedURI, when set, is a resource Run reports as updated every
	// watchInterval.
	watchedURI    string
	watchInterval time.Duration

	logger *slog.Logger

	// origin is the source of what is added from now on (see SetOrigin).
	origin string

	// names holds the names of tools, for HasTool. running holds those of
	// tools added to a server while it serves (see addRunningTool), and
	// sources what sources outside the catalog offer (see SetSource): their
	// tools exist as much as the others. servers are the servers Register
	// has seen, which SetSource updates.
	names   map[string]bool
	mu      sync.RWMutex
	running map[string]bool
	// runningOn holds the names of the tools added to each server while
	// it serves, for the views (see ServerView.HasTool).
	runningOn map[*sdk.Server]map[string]bool
	sources   map[string]*source
	servers   []*sdk.Server
	// views are the views RegisterView made, which SetSource updates.
	views []view
	// forwardToSources: see ForwardToSources.
	forwardToSources bool
	// taskTools is how tools' calls may run as tasks, where that is set
	// by SetTaskSupport rather than by the tool (config, upstream tools).
	taskTools map[string]tasks.ToolTasks
	// declaredTasks is what the catalog's own task tools declare, filled
	// as they are added, before any server is built: read without a lock.
	declaredTasks map[string]tasks.ToolTasks
	// annotations are the hints of the catalog's own tools, by name,
	// filled as they are added, as names is: read without a lock.
	annotations map[string]*sdk.ToolAnnotations
	// noSession holds the names of the catalog's own tools that use no
	// session (see NoSession), filled as they are added: read without a
	// lock, as declaredTasks.
	noSession map[string]bool
	// apps indexes the tools of sources that serve MCP Apps by their
	// names in the source (apps.go); replaced whole under mu.
	apps atomic.Pointer[appIndex]
	// appURIs indexes the ui:// resources of those sources by their URIs
	// in the source (apps.go); replaced whole under mu.
	appURIs atomic.Pointer[appIndex]
}

// view is what the catalog asks of the views it keeps up to date: a
// [ServerView] (viewsync.go). Its methods are called with mu held.
type view interface {
	// server is the SDK server the view registers on.
	server() *sdk.Server
	// refresh brings the view and its server up to date with the catalog.
	refresh()
	// AppTool: see [ServerView.AppTool].
	AppTool(name string) []string
}

// Tool is one tool, ready to add to any server. Add receives the server so
// that tools which change the server's lists (conformance) can reach it.
type Tool struct {
	Name  string
	Add   func(s *sdk.Server)
	Tasks tasks.ToolTasks
	// NoSession says that the handler uses nothing of the session its
	// request comes on (req.Session: no logging, progress, sampling,
	// elicitation or roots through it), so a 2026-07-28 call of it may be
	// served without a session made for the one request (see
	// [Catalog.NoSession]).
	NoSession bool

	// sources are the sources the tool belongs to, set when it is added to
	// a catalog: one, or more when toolsets share the tool.
	sources []string
	// input returns the tool's input schema as the SDK serves it; nil when
	// not known (a Tool made without NewTool).
	input func() (any, error)
	// annotations are the tool's hints; nil when it has none or they are
	// not known (a Tool made without NewTool).
	annotations *sdk.ToolAnnotations
}

type resource struct {
	r      *sdk.Resource
	h      sdk.ResourceHandler
	source string
}

type resourceTemplate struct {
	t      *sdk.ResourceTemplate
	h      sdk.ResourceHandler
	source string
}

type prompt struct {
	p      *sdk.Prompt
	h      sdk.PromptHandler
	source string
}

type completionKey struct {
	ref, arg string
}

// NewTool pairs a tool with its typed handler. The SDK infers the schemas it
// is not given from In and Out and validates input before h runs. An input
// schema given as a [jsonschema.Schema] reaches the SDK already encoded (see
// [encodedInputSchema]).
func NewTool[In, Out any](t *sdk.Tool, h sdk.ToolHandlerFor[In, Out]) Tool {
	t = encodedInputSchema(t)
	tl := Tool{Name: t.Name, Add: func(s *sdk.Server) { sdk.AddTool(s, t, h) }, input: inferredInput[In], annotations: t.Annotations}
	if schema := t.InputSchema; schema != nil {
		tl.input = func() (any, error) { return schema, nil }
	}
	return tl
}

// inferredInput returns the input schema the SDK infers for a tool whose
// handler takes In and that gives none (see [sdk.AddTool]).
func inferredInput[In any]() (any, error) {
	rt := reflect.TypeFor[In]()
	if rt == reflect.TypeFor[any]() {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	return jsonschema.ForType(rt, &jsonschema.ForOptions{})
}

// NewTaskTool is NewTool for a tool whose calls may run as tasks.
func NewTaskTool[In, Out any](t *sdk.Tool, h sdk.ToolHandlerFor[In, Out], tt tasks.ToolTasks) Tool {
	tl := NewTool(t, h)
	tl.Tasks = tt
	return tl
}

// New returns an empty catalog; logger receives its diagnostics (nil
// discards them).
func New(logger *slog.Logger) *Catalog {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Catalog{
		completions: map[completionKey][]string{},
		logger:      logger,
		origin:      curation.SourceProgram,
		names:       map[string]bool{},
		running:     map[string]bool{},
		runningOn:   map[*sdk.Server]map[string]bool{},
		sources:     map[string]*source{},
	}
}

// SetOrigin makes name the source of the tools, resources, templates and
// prompts added to c from now on, which views select them by (see
// [curation.ToolSelection.Source]), and returns the source it replaces.
// Until it is called, the source is [curation.SourceProgram].
func (c *Catalog) SetOrigin(name string) (previous string) {
	previous, c.origin = c.origin, name
	return previous
}

// Public is a catalog as the public package tools shows it to programs
// built on Portcullis: tools.Catalog is defined on it (type Catalog
// Public), so the root package turns a *Public into the *tools.Catalog
// programs add their tools to with a conversion, and neither package
// needs to know the other's type. Its one method serves tools.
type Public struct{ c *Catalog }

// Public returns c as package tools shows it (see [Public]).
func (c *Catalog) Public() *Public { return &Public{c} }

// Catalog returns the catalog p shows.
func (p *Public) Catalog() *Catalog { return p.c }

// encodedInputSchema returns t with its input schema encoded once, as JSON,
// if it is a [jsonschema.Schema]; otherwise t itself. On every tools/call of
// protocol 2026-07-28 and later the SDK encodes the tool's input schema
// again to look for x-mcp-header annotations. Encoding a jsonschema.Schema
// walks it by reflection, which costs far more than copying JSON that is
// already encoded. The SDK resolves the schema from these bytes to validate arguments,
// exactly as from the struct, and tools/list shows the same JSON.
func encodedInputSchema(t *sdk.Tool) *sdk.Tool {
	s, ok := t.InputSchema.(*jsonschema.Schema)
	if !ok || s == nil {
		return t
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("tools: %s: input schema: %v", t.Name, err))
	}
	tt := *t
	tt.InputSchema = json.RawMessage(b)
	return &tt
}

// appIndex maps a tool's name in its source to the names the tools of
// that name are listed by, sorted.
type appIndex map[string][]string
