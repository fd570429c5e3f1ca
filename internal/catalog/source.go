package catalog

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/mcpapps"
)

// Set is what a source outside the catalog offers while servers run, such
// as an upstream MCP server: tools, resources, resource templates and
// prompts, named as servers list them. See [Catalog.SetSource].
type Set struct {
	Tools     []SetTool
	Resources []SetResource
	Templates []SetTemplate
	Prompts   []SetPrompt
	// Complete answers completion requests for the set's prompts and
	// resource templates; nil when the source offers none. It is used
	// only by servers whose options [Catalog.Apply] set after
	// [Catalog.ForwardToSources].
	Complete func(context.Context, *sdk.CompleteRequest) (*sdk.CompleteResult, error)
	// Subscribe and Unsubscribe pass a client's resource subscription on
	// to the source, for the set's resources; nil when it takes none. The
	// source reports updates with [Catalog.ResourceUpdated]. Like
	// Complete, they are used only after [Catalog.ForwardToSources].
	Subscribe   func(ctx context.Context, uri string) error
	Unsubscribe func(ctx context.Context, uri string) error
	// Origin is the source's name in an exposure's selections (an
	// upstream's name, see [curation.ToolSelection.Source]); empty means
	// the name given to [Catalog.SetSource].
	Origin string
	// Prefix is what the set's tool and prompt names start with, followed
	// by "_" (an upstream's prefix), and selections' name patterns leave
	// out; empty means none.
	Prefix string
	// Order ranks the source among those that offer one resource URI (or
	// URI template): the lowest Order serves it, and of sources of one
	// Order the one whose name sorts first (an upstream's Order is its
	// place in the configuration). What the sources offer decides, never
	// the order in which they were set.
	Order int
	// Fixed says that what the set offers does not change while servers
	// run (declared HTTP tools), unlike an upstream's lists: an exposure
	// that selects what it lacks is wrong, not early (see
	// [Catalog.CheckExposure]).
	Fixed bool
}

// SetTool is a tool of a [Set] with its raw handler. The handler validates
// its own input, as for [sdk.Server.AddTool].
type SetTool struct {
	Tool    *sdk.Tool
	Handler sdk.ToolHandler
	// Direct, when set, serves the calls that the HTTP handler serves
	// without the SDK server (see [DirectHandler]); the others take
	// Handler through the SDK server.
	Direct DirectHandler
}

// A DirectHandler serves a tools/call of the 2026-07-28 era outside the
// SDK server: the HTTP handler decodes the request, runs the server's
// receiving middleware (telemetry, the tool gate, tasks, requestState
// sealing, the tool timeout, recovery) around the handler and encodes
// what it returns. It is for a tool whose call is forwarded to another
// server, where the SDK server's per-request session costs as much as
// the forwarding does. The request has no session: the HTTP handler
// serves directly only calls that ask for no notifications during the
// call (no progress token, no log level) and whose client takes
// multi-round-trip results itself. It returns a [*RawToolResult] to pass
// on a result as it was received, or any result the SDK server would
// send.
type DirectHandler func(ctx context.Context, req *sdk.CallToolRequest) (sdk.Result, error)

// RawToolResult is a tools/call result passed on as another server sent
// it: a complete result (not one that asks for input, not a task handle).
type RawToolResult struct {
	sdk.ResultBase
	// JSON is the result object as received.
	JSON json.RawMessage
	// IsError is the result's isError.
	IsError bool
	// NamesServer reports whether the result's _meta names the server
	// that made it (io.modelcontextprotocol/serverInfo), and HasResultType
	// whether it has a resultType: a result without them is sent with the
	// serving server's name and resultType "complete" added, as the SDK
	// server adds them to every result.
	NamesServer, HasResultType bool
}

// MarshalJSON returns the result as received.
func (r *RawToolResult) MarshalJSON() ([]byte, error) { return r.JSON, nil }

// ToolError reports whether the result is a tool's error result
// (isError), as telemetry classifies it.
func (r *RawToolResult) ToolError() bool { return r.IsError }

// SetResource is a resource of a [Set].
type SetResource struct {
	Resource *sdk.Resource
	Handler  sdk.ResourceHandler
}

// SetTemplate is a resource template of a [Set].
type SetTemplate struct {
	Template *sdk.ResourceTemplate
	Handler  sdk.ResourceHandler
}

// SetPrompt is a prompt of a [Set].
type SetPrompt struct {
	Prompt  *sdk.Prompt
	Handler sdk.PromptHandler
}

// bindsHeaders reports whether an input schema may bind arguments to
// headers: it names x-mcp-header anywhere. A schema that cannot be
// encoded is taken to.
func bindsHeaders(schema any) bool {
	raw, ok := schema.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(schema); err != nil {
			return true
		}
	}
	return bytes.Contains(raw, []byte(`"x-mcp-header"`))
}

// ErrClash is wrapped by the error [Catalog.SetSource] returns when a name
// of the set is already taken.
var ErrClash = errors.New("name clash")

// source is a Set as the catalog holds it, keyed by name (or URI).
type source struct {
	name, origin, prefix   string
	order                  int
	fixed                  bool // see Set.Fixed
	subscribe, unsubscribe func(ctx context.Context, uri string) error
	complete               func(context.Context, *sdk.CompleteRequest) (*sdk.CompleteResult, error)
	tools                  map[string]SetTool
	direct                 map[string]DirectHandler // tools' direct handlers, see newSource
	// offered are the resources and templates the set offers, and
	// resources and templates those of them the source serves: the
	// URIs no source ranked before it offers (see assignURIs).
	offeredResources map[string]SetResource
	offeredTemplates map[string]SetTemplate
	resources        map[string]SetResource
	templates        map[string]SetTemplate
	prompts          map[string]SetPrompt
	// apps is whether the source serves MCP Apps: a tool of it says
	// anything of Apps in its _meta, or a resource's URI is ui://.
	apps bool
}

func newSource(name string, s Set) *source {
	src := &source{
		name:             name,
		origin:           cmp.Or(s.Origin, name),
		prefix:           s.Prefix,
		order:            s.Order,
		fixed:            s.Fixed,
		complete:         s.Complete,
		subscribe:        s.Subscribe,
		unsubscribe:      s.Unsubscribe,
		tools:            make(map[string]SetTool, len(s.Tools)),
		offeredResources: make(map[string]SetResource, len(s.Resources)),
		offeredTemplates: make(map[string]SetTemplate, len(s.Templates)),
		prompts:          make(map[string]SetPrompt, len(s.Prompts)),
	}
	for _, t := range s.Tools {
		src.tools[t.Tool.Name] = t
		if t.Direct != nil && !bindsHeaders(t.Tool.InputSchema) {
			if src.direct == nil {
				src.direct = map[string]DirectHandler{}
			}
			src.direct[t.Tool.Name] = t.Direct
		}
		src.apps = src.apps || mcpapps.HasUI(t.Tool.Meta)
	}
	for _, r := range s.Resources {
		if _, dup := src.offeredResources[r.Resource.URI]; !dup {
			src.offeredResources[r.Resource.URI] = r
		}
		src.apps = src.apps || mcpapps.IsURI(r.Resource.URI)
	}
	for _, t := range s.Templates {
		if _, dup := src.offeredTemplates[t.Template.URITemplate]; !dup {
			src.offeredTemplates[t.Template.URITemplate] = t
		}
		src.apps = src.apps || mcpapps.IsURI(t.Template.URITemplate)
	}
	for _, p := range s.Prompts {
		src.prompts[p.Prompt.Name] = p
	}
	src.resources, src.templates = src.offeredResources, src.offeredTemplates
	return src
}

// before reports whether src ranks before o for a URI both offer.
func (src *source) before(o *source) bool {
	if src.order != o.order {
		return src.order < o.order
	}
	return src.name < o.name
}

// uris are the resources and templates a source serves.
type uris struct {
	resources map[string]SetResource
	templates map[string]SetTemplate
}

// unclaimed returns the items of offered whose keys taken lacks (offered
// itself when it is all of them), and adds their keys to taken.
func unclaimed[V any](offered map[string]V, taken map[string]bool) map[string]V {
	out := offered
	for k := range offered {
		if taken[k] {
			out = make(map[string]V, len(offered))
			for k, v := range offered {
				if !taken[k] {
					out[k] = v
				}
			}
			break
		}
	}
	for k := range out {
		taken[k] = true
	}
	return out
}

// missing returns the keys of prev that next lacks.
func missing[V any](prev, next map[string]V) []string {
	var out []string
	for k := range prev {
		if _, ok := next[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// local returns the name of the source's tool or prompt name without
// the source's prefix.
func (src *source) local(name string) string {
	if src.prefix == "" {
		return name
	}
	return strings.TrimPrefix(name, src.prefix+"_")
}
