package portcullis

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/curation"
	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/mcpname"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
	"github.com/portcullis-mcp/portcullis/mcp"
	"github.com/portcullis-mcp/portcullis/observability"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// virtualServer is one entry of the `servers:` list: a virtual MCP server
// on the MCP listener, with its own path, resource (token audience),
// tools, resources, prompts, policy and limits, chosen from what the root
// server at /mcp offers (the built-in toolsets, the program's own tools
// and the upstreams). A client connects to it by its URL, as to /mcp.
type virtualServer struct {
	// Name identifies the server: the server label of metrics, spans and
	// audit lines (the root server at /mcp is "root") and the name on the
	// consent page. 1 to 63 lowercase letters, digits and '-'; unique, and
	// not "root".
	Name string `yaml:"name" schema:"required"`
	// Path is where the server is served on the MCP listener, such as
	// /mcp/team-a: lowercase letters, digits, '-', '_', '.' and '/',
	// starting with '/', without a trailing '/', "//", or a "." or ".."
	// segment. It may not be /mcp (the root server) nor /healthz,
	// /readyz, or under /oauth, /.well-known or /dev-issuer. Unique.
	Path string `yaml:"path" schema:"required"`
	// Resource is the server's public URL: the audience a token for this
	// server must carry, and the "resource" of its metadata (RFC 9728),
	// served at /.well-known/oauth-protected-resource followed by the
	// path. Its path must be the server's path. Unset means the
	// scheme and host of auth.resource followed by the path, such as
	// https://mcp.example.com/mcp/team-a. It must differ from auth.resource
	// and from every other server's, so that a token issued for one server
	// is refused at the others.
	Resource string `yaml:"resource" schema:"url"`
	// Title is the server's human-readable name, in the serverInfo of its
	// initialize result (and server/discover). Empty means none.
	Title string `yaml:"title"`
	// Instructions tell the model what the server is for and how to use
	// its tools, in its initialize result (and server/discover). Empty
	// means none.
	Instructions string `yaml:"instructions"`
	// Tools selects the tools the server exposes, and how each is shown.
	// Empty means none.
	Tools []toolSelection `yaml:"tools"`
	// Resources selects the resources and resource templates the server
	// exposes. Empty means none.
	Resources []resourceSelection `yaml:"resources"`
	// Prompts selects the prompts the server exposes. Empty means none.
	Prompts []promptSelection `yaml:"prompts"`
	// Auth is what a call to this server needs besides a valid token for
	// its resource. Empty means nothing more: none of auth.required_scopes
	// and auth.policy apply here.
	Auth virtualServerAuth `yaml:"auth"`
	// Limits are the per-caller rate limits of this server, counted
	// apart from the other servers'. Unset keys take the values of the
	// limits section.
	Limits virtualServerLimits `yaml:"limits"`
}

// virtualServerAuth is what a call to one virtual server needs.
type virtualServerAuth struct {
	// RequiredScopes are needed for any call to the server, as
	// auth.required_scopes is for /mcp.
	RequiredScopes []string `yaml:"required_scopes"`
	// Policy lists per-tool requirements, as auth.policy does for /mcp;
	// each rule names a tool by the name this server exposes it under
	// (its expose_as, if it has one).
	Policy []auth.ToolPolicy `yaml:"policy"`
}

// virtualServerLimits are the per-caller rate limits of one virtual
// server.
type virtualServerLimits struct {
	// RatePerPrincipal is the sustained requests per second one caller
	// may make to this server. Zero means limits.rate_per_principal.
	RatePerPrincipal float64 `yaml:"rate_per_principal" schema:"min=0"`
	// BurstPerPrincipal is how many requests a caller may make to this
	// server at once after a pause. Zero means limits.burst_per_principal.
	BurstPerPrincipal int `yaml:"burst_per_principal" schema:"min=0"`
}

// toolSelection chooses tools of one source for a virtual server and,
// for a single tool, how the server shows it.
type toolSelection struct {
	// Source is where the tools come from: a built-in toolset enabled in
	// tools.toolsets (core, workshop, conformance), "program" for the tools
	// a Go program adds with the library, or the name of an upstream.
	Source string `yaml:"source" schema:"required"`
	// Name is the tool's name in its source, or a pattern ("*" any run of
	// characters, "?" one character, [a-z] one of a class, as path.Match):
	// an upstream's tool is named without its prefix ("search", not
	// "github_search"). Unset means "*", every tool of the source. The keys
	// below apply only when Name names one tool (holds no *, ?, [ or \).
	Name string `yaml:"name"`
	// ExposeAs is the name the server lists the tool under and callers
	// call it by. Unset means its name on /mcp (an upstream's tool with its
	// prefix). Letters, digits, '_', '-' and '.'; one tool per name in a
	// server.
	ExposeAs string `yaml:"expose_as"`
	// Title replaces the tool's title. Empty keeps it.
	Title string `yaml:"title"`
	// Description replaces the tool's description. Empty keeps it.
	Description string `yaml:"description"`
	// Annotations replace the tool's hints; a hint left unset keeps the
	// tool's own.
	Annotations toolAnnotations `yaml:"annotations"`
	// Arguments change how arguments of the tool's input schema are
	// described, by argument name. Each must be an argument of the tool.
	Arguments map[string]argumentCuration `yaml:"arguments"`
	// FixedArguments sets arguments on every call, by name, to a JSON value
	// the argument's schema accepts. A fixed argument is removed from the
	// input schema callers see (and from its required list), and a call
	// that names it (in any case) is refused with invalid params: never
	// merged.
	FixedArguments map[string]json.RawMessage `yaml:"fixed_arguments"`
}

// toolAnnotations replace a tool's hints (MCP tool annotations).
type toolAnnotations struct {
	// ReadOnlyHint says the tool does not change its environment.
	ReadOnlyHint *bool `yaml:"read_only_hint"`
	// DestructiveHint says the tool may destroy or overwrite.
	DestructiveHint *bool `yaml:"destructive_hint"`
	// IdempotentHint says calling it again with the same arguments does
	// nothing more.
	IdempotentHint *bool `yaml:"idempotent_hint"`
	// OpenWorldHint says the tool reaches outside systems.
	OpenWorldHint *bool `yaml:"open_world_hint"`
}

// set reports whether any hint is set.
func (a toolAnnotations) set() bool {
	return a.ReadOnlyHint != nil || a.DestructiveHint != nil || a.IdempotentHint != nil || a.OpenWorldHint != nil
}

// argumentCuration changes how one argument of a tool is described.
type argumentCuration struct {
	// Description replaces the argument's description. Empty keeps it.
	Description string `yaml:"description"`
	// Default is the argument's default, a JSON value the argument's
	// schema accepts: shown as its default in the input schema, and set
	// on every call that leaves the argument out (a call that names it in
	// another letter case is refused). Unset keeps the schema's, and sets
	// nothing.
	Default json.RawMessage `yaml:"default"`
}

// resourceSelection chooses resources and resource templates of one
// source for a virtual server and, for a single one, how the server
// shows it.
type resourceSelection struct {
	// Source is where the resources come from: a built-in toolset enabled
	// in tools.toolsets, "declared" for tools.resources, "program" for the
	// resources a Go program adds with the library, or the name of an
	// upstream.
	Source string `yaml:"source" schema:"required"`
	// URI is the resource's URI (a template's URI template), or a pattern
	// as in path.Match, where "*" does not match "/": docs://* matches
	// docs://a but not docs://a/b. Unset means every resource and template
	// of the source. The keys below apply only when URI names one (holds
	// no *, ?, [ or \).
	URI string `yaml:"uri"`
	// ExposeAs replaces the resource's name; its URI never changes.
	ExposeAs string `yaml:"expose_as"`
	// Title replaces the resource's title. Empty keeps it.
	Title string `yaml:"title"`
	// Description replaces the resource's description. Empty keeps it.
	Description string `yaml:"description"`
}

// promptSelection chooses prompts of one source for a virtual server and,
// for a single prompt, how the server shows it.
type promptSelection struct {
	// Source is where the prompts come from: a built-in toolset enabled in
	// tools.toolsets, "declared" for tools.prompts, "program" for the
	// prompts a Go program adds with the library, or the name of an
	// upstream.
	Source string `yaml:"source" schema:"required"`
	// Name is the prompt's name in its source (an upstream's without its
	// prefix), or a pattern as for tools. Unset means "*". The keys below
	// apply only when Name names one prompt.
	Name string `yaml:"name"`
	// ExposeAs is the name the server lists the prompt under and callers
	// get it by. Unset means its name on /mcp. One prompt per name in a
	// server.
	ExposeAs string `yaml:"expose_as"`
	// Title replaces the prompt's title. Empty keeps it.
	Title string `yaml:"title"`
	// Description replaces the prompt's description. Empty keeps it.
	Description string `yaml:"description"`
}

// The sources a selection may name besides the built-in toolsets and the
// upstreams.
const (
	// sourceProgram is what a Go program adds with the library.
	sourceProgram = "program"
	// sourceDeclared is the resources and prompts declared in
	// tools.resources and tools.prompts.
	sourceDeclared = "declared"
)

// rootServerName is the server label of the root server at /mcp, which
// no virtual server may take.
const rootServerName = "root"

// builtinToolsets are the toolsets a selection's source may name.
var builtinToolsets = []string{toolsets.ToolsetCore, toolsets.ToolsetWorkshop, toolsets.ToolsetConformance}

// isPattern reports whether a selection's name or URI is a pattern rather
// than one name: it holds a path.Match metacharacter, or is empty (every
// resource).
func isPattern(s string) bool {
	return s == "" || strings.ContainsAny(s, `*?[\`)
}

// serversDefaults fills the defaults of the servers list: a tool's or
// prompt's name "*", the resource from auth.resource (when it is set),
// and the limits of the limits section. Call it after c.Limits.Defaults.
func (c *configFile) serversDefaults() {
	c.defaultServerResources()
	for i := range c.Servers {
		s := &c.Servers[i]
		for j := range s.Tools {
			if s.Tools[j].Name == "" {
				s.Tools[j].Name = "*"
			}
		}
		for j := range s.Prompts {
			if s.Prompts[j].Name == "" {
				s.Prompts[j].Name = "*"
			}
		}
		if s.Limits.RatePerPrincipal == 0 {
			s.Limits.RatePerPrincipal = c.Limits.RatePerPrincipal
		}
		if s.Limits.BurstPerPrincipal == 0 {
			s.Limits.BurstPerPrincipal = c.Limits.BurstPerPrincipal
		}
	}
}

// defaultServerResources sets each server's unset resource from
// auth.resource. serve --dev calls it again once it has set auth.resource.
func (c *configFile) defaultServerResources() {
	for i := range c.Servers {
		c.Servers[i].defaultResource(c.Auth.Resource)
	}
}

// defaultResource sets an unset Resource to the scheme and host of root
// (auth.resource) followed by the server's path. It leaves it unset when
// root is not an absolute URL or the path does not start with "/".
func (s *virtualServer) defaultResource(root string) {
	if s.Resource == "" {
		s.Resource = resourceAt(root, s.Path)
	}
}

// resourceAt returns the scheme and host of root followed by path, or ""
// when root is not an absolute URL or path does not start with "/".
func resourceAt(root, path string) string {
	if u, err := url.Parse(root); err == nil && u.Scheme != "" && u.Host != "" && strings.HasPrefix(path, "/") {
		return u.Scheme + "://" + u.Host + path
	}
	return ""
}

// validServerName reports whether name is 1 to 63 lowercase letters,
// digits and '-'. (A loop, not a regexp: a package-level regexp is built
// at every start, and {1,63} would be compiled as 63 copies.)
func validServerName(name string) bool {
	if len(name) == 0 || len(name) > 63 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// reservedPaths are paths of the MCP listener no virtual server may be
// served at, nor under: the public endpoints, the authorization server's
// and the dev issuer's. Paths under /mcp are free; /mcp itself is the
// root server's.
var reservedPaths = []string{"/healthz", "/readyz", "/oauth", "/.well-known", devIssuerPath}

// validateServers reports every static problem of the servers list at
// once, each naming its key ("servers[1].tools[0].fixed_arguments.region:
// …"): what can be checked without the catalog. Whether a selected tool
// exists, has the arguments curated, accepts a fixed value, or clashes
// with another tool a pattern matches, is checked once the catalog and
// the upstreams are built.
func (c *configFile) validateServers() error {
	var errs []error
	names := map[string]int{}
	paths := map[string]int{}
	resources := map[string]int{}
	sources := c.selectionSources()
	for i := range c.Servers {
		s := &c.Servers[i]
		at := func(key, format string, args ...any) {
			errs = append(errs, fmt.Errorf("servers[%d].%s: "+format, append([]any{i, key}, args...)...))
		}
		switch j, dup := names[s.Name]; {
		case !validServerName(s.Name):
			at("name", "%q must be 1 to 63 lowercase letters, digits and '-'", s.Name)
		case s.Name == rootServerName:
			at("name", "%q is the name of the root server at %s", s.Name, mcpPath)
		case dup:
			at("name", "%q is also the name of servers[%d]", s.Name, j)
		default:
			names[s.Name] = i
		}
		pathOK := false
		if err := checkServerPath(s.Path); err != nil {
			at("path", "%v", err)
		} else if j, dup := paths[s.Path]; dup {
			at("path", "%q is also the path of servers[%d]", s.Path, j)
		} else {
			paths[s.Path] = i
			pathOK = true
		}
		// A resource made from a wrong path would only repeat the path's
		// problem.
		if s.Resource != "" && (pathOK || s.Resource != resourceAt(c.Auth.Resource, s.Path)) {
			switch u, err := url.Parse(s.Resource); {
			case err != nil:
				// Reported by the auth check below.
			case pathOK && u.Path != s.Path:
				at("resource", "%q must name the server's path %s", s.Resource, s.Path)
			case u.RawQuery != "":
				at("resource", "%q must not have a query", s.Resource)
			}
			key := strings.ToLower(s.Resource)
			if j, dup := resources[key]; dup {
				at("resource", "%q is also the resource of servers[%d]; a token for one would be accepted at the other", s.Resource, j)
			} else if strings.EqualFold(s.Resource, c.Auth.Resource) {
				at("resource", "%q is auth.resource, the root server's; a token for one would be accepted at the other", s.Resource)
			}
			resources[key] = i
		}
		for _, err := range unjoin(c.serverAuth(s).Validate()) {
			section := "auth."
			if strings.HasPrefix(err.Error(), "resource:") {
				section = ""
			}
			errs = append(errs, fmt.Errorf("servers[%d].%s%w", i, section, err))
		}
		lim := limits.Options{RatePerPrincipal: s.Limits.RatePerPrincipal, BurstPerPrincipal: s.Limits.BurstPerPrincipal}
		for _, err := range unjoin(lim.Validate()) {
			errs = append(errs, fmt.Errorf("servers[%d].limits.%w", i, err))
		}
		sources.checkSelections(s, at)
	}
	return errors.Join(errs...)
}

// checkSelections reports the static problems of the server's tool,
// resource and prompt selections, through at (which prefixes the
// server's key).
func (src selectionSources) checkSelections(s *virtualServer, at func(key, format string, args ...any)) {
	exposed := map[string]string{} // a single tool's exposed name → its key
	for j, t := range s.Tools {
		k := fmt.Sprintf("tools[%d]", j)
		tat := func(key, format string, args ...any) { at(k+"."+key, format, args...) }
		up, ok := src.check(t.Source, tat)
		if err := checkPattern(t.Name); err != nil {
			tat("name", "%v", err)
			continue
		}
		if isPattern(t.Name) {
			for _, key := range t.curated() {
				tat(key, "applies to one tool, but name %q is a pattern", t.Name)
			}
			continue
		}
		if t.ExposeAs != "" && !mcpname.Valid(t.ExposeAs) {
			tat("expose_as", "%q must be 1 to %d letters, digits, '_', '-' or '.'", t.ExposeAs, mcpname.MaxLen)
		}
		t.checkArguments(tat)
		if ok {
			noteExposed(exposed, exposedName(t.ExposeAs, t.Name, up), k, t.ExposeAs != "", tat, "tool")
		}
	}
	for j, r := range s.Resources {
		k := fmt.Sprintf("resources[%d]", j)
		rat := func(key, format string, args ...any) { at(k+"."+key, format, args...) }
		src.check(r.Source, rat)
		if err := checkPattern(r.URI); err != nil {
			rat("uri", "%v", err)
			continue
		}
		if isPattern(r.URI) {
			for _, key := range curated(r.ExposeAs, r.Title, r.Description) {
				rat(key, "applies to one resource, but uri %q is a pattern", r.URI)
			}
			continue
		}
		if r.ExposeAs != "" && strings.TrimSpace(r.ExposeAs) == "" {
			rat("expose_as", "must not be blank")
		}
	}
	exposed = map[string]string{}
	for j, p := range s.Prompts {
		k := fmt.Sprintf("prompts[%d]", j)
		pat := func(key, format string, args ...any) { at(k+"."+key, format, args...) }
		up, ok := src.check(p.Source, pat)
		if err := checkPattern(p.Name); err != nil {
			pat("name", "%v", err)
			continue
		}
		if isPattern(p.Name) {
			for _, key := range curated(p.ExposeAs, p.Title, p.Description) {
				pat(key, "applies to one prompt, but name %q is a pattern", p.Name)
			}
			continue
		}
		if p.ExposeAs != "" && !mcpname.Valid(p.ExposeAs) {
			pat("expose_as", "%q must be 1 to %d letters, digits, '_', '-' or '.'", p.ExposeAs, mcpname.MaxLen)
		}
		if ok {
			noteExposed(exposed, exposedName(p.ExposeAs, p.Name, up), k, p.ExposeAs != "", pat, "prompt")
		}
	}
}

// checkServerPath reports what is wrong with a virtual server's path.
func checkServerPath(p string) error {
	switch {
	case p == "":
		return errors.New("required, such as /mcp/team-a")
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q must start with /", p)
	case strings.Contains(p, "%"):
		return fmt.Errorf("%q must not hold %%: write the path decoded, in the characters allowed", p)
	case strings.Contains(p, "//"):
		return fmt.Errorf("%q must not hold //", p)
	case strings.HasSuffix(p, "/"):
		return fmt.Errorf("%q must not end with /", p)
	case strings.ToLower(p) != p:
		return fmt.Errorf("%q must be lowercase", p)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("%q must not hold a %q segment", p, seg)
		}
	}
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./", c)) {
			return fmt.Errorf("%q may hold only lowercase letters, digits, '-', '_', '.' and '/', not %q", p, c)
		}
	}
	if p == mcpPath {
		return fmt.Errorf("%q is the root server's path", p)
	}
	for _, r := range reservedPaths {
		if p == r || strings.HasPrefix(p, r+"/") {
			return fmt.Errorf("%q collides with %s, which Portcullis serves itself", p, r)
		}
	}
	return nil
}

// checkPattern reports a name or URI pattern path.Match cannot use.
func checkPattern(p string) error {
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("bad pattern %q", p)
	}
	return nil
}

// curated returns the curation keys t sets, in the order of the keys.
func (t toolSelection) curated() []string {
	keys := curated(t.ExposeAs, t.Title, t.Description)
	for _, k := range []struct {
		key string
		set bool
	}{
		{"annotations", t.Annotations.set()},
		{"arguments", len(t.Arguments) > 0},
		{"fixed_arguments", len(t.FixedArguments) > 0},
	} {
		if k.set {
			keys = append(keys, k.key)
		}
	}
	return keys
}

// curated returns the keys among expose_as, title and description that a
// selection sets.
func curated(exposeAs, title, description string) []string {
	var keys []string
	for _, k := range []struct{ key, v string }{{"expose_as", exposeAs}, {"title", title}, {"description", description}} {
		if k.v != "" {
			keys = append(keys, k.key)
		}
	}
	return keys
}

// checkArguments reports the static problems of a single tool's
// arguments and fixed_arguments.
func (t toolSelection) checkArguments(at func(key, format string, args ...any)) {
	for _, name := range slices.Sorted(maps.Keys(t.Arguments)) {
		a := t.Arguments[name]
		key := "arguments." + name
		switch _, fixed := t.FixedArguments[name]; {
		case strings.TrimSpace(name) == "":
			at(key, "an argument needs a name")
		case fixed:
			at(key, "%q is also in fixed_arguments, which removes it from the schema callers see", name)
		case a.Description == "" && a.Default == nil:
			at(key, "sets neither description nor default")
		}
	}
	lower := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(t.FixedArguments)) {
		key := "fixed_arguments." + name
		if strings.TrimSpace(name) == "" {
			at(key, "an argument needs a name")
			continue
		}
		if other, dup := lower[strings.ToLower(name)]; dup {
			at(key, "%q and %q differ only in case: callers may name neither, so fix one", other, name)
			continue
		}
		lower[strings.ToLower(name)] = name
	}
}

// exposedName is the name a single tool or prompt is exposed under:
// exposeAs, or its name on /mcp (an upstream's with the upstream's
// prefix; up is nil for other sources).
func exposedName(exposeAs, name string, up *upstream.Options) string {
	switch {
	case exposeAs != "":
		return exposeAs
	case up != nil:
		return up.ServedName(name)
	}
	return name
}

// noteExposed records that the selection at key exposes name, and
// reports it when another selection of the server exposes it too.
func noteExposed(exposed map[string]string, name, key string, renamed bool, at func(key, format string, args ...any), kind string) {
	field := "name"
	if renamed {
		field = "expose_as"
	}
	if other, dup := exposed[name]; dup {
		at(field, "the server would expose two %ss named %q (%s exposes one)", kind, name, other)
		return
	}
	exposed[name] = key
}

// selectionSources is what a selection's source may name.
type selectionSources struct {
	enabled   []string                     // toolsets enabled in tools.toolsets
	upstreams map[string]*upstream.Options // by name
}

func (c *configFile) selectionSources() selectionSources {
	s := selectionSources{enabled: c.Tools.Toolsets, upstreams: map[string]*upstream.Options{}}
	for i := range c.Upstreams {
		if _, dup := s.upstreams[c.Upstreams[i].Name]; !dup {
			s.upstreams[c.Upstreams[i].Name] = &c.Upstreams[i]
		}
	}
	return s
}

// check reports what is wrong with source, at the selection's key
// "source". It returns the upstream source names, if it names one, and
// whether source is valid.
func (s selectionSources) check(source string, at func(key, format string, args ...any)) (*upstream.Options, bool) {
	up := s.upstreams[source]
	builtin := slices.Contains(builtinToolsets, source) || source == sourceProgram || source == sourceDeclared
	switch {
	case source == "":
		at("source", "required: a toolset (%s), %s, %s, or an upstream's name", strings.Join(builtinToolsets, ", "), sourceDeclared, sourceProgram)
	case builtin && up != nil:
		at("source", "%q names both a built-in source and an upstream; rename the upstream", source)
	case up != nil:
		return up, true
	case slices.Contains(builtinToolsets, source) && !slices.Contains(s.enabled, source):
		at("source", "the %s toolset is not enabled: add it to tools.toolsets", source)
	case builtin:
		return nil, true
	default:
		known := append(slices.Clone(builtinToolsets), sourceDeclared, sourceProgram)
		for name := range s.upstreams {
			known = append(known, name)
		}
		slices.Sort(known)
		known = slices.Compact(known)
		at("source", "unknown source %q: want one of %s", source, strings.Join(known, ", "))
	}
	return nil, false
}

// serverAuth returns the auth options that validate the server's resource,
// required scopes and policy by the rules of auth.resource,
// auth.required_scopes and auth.policy. With auth on, a stand-in issuer
// stands for the configured ones, whose problems the auth section reports.
func (c *configFile) serverAuth(s *virtualServer) *auth.Options {
	o := &auth.Options{Resource: s.Resource, RequiredScopes: s.Auth.RequiredScopes, Policy: s.Auth.Policy}
	if c.authForValidation().Enabled() {
		o.Issuers = []auth.IssuerOptions{{Issuer: "https://issuer.invalid"}}
		if s.Resource == "" {
			// auth.resource is missing or not a URL, and reported so.
			o.Resource = "https://resource.invalid" + s.Path
		}
	}
	return o
}

// virtualApp is one virtual server as the program serves it.
type virtualApp struct {
	cfg    *virtualServer
	server *mcp.Server
}

// newVirtualServers builds the servers of cfg.Servers on cat, each with
// root's deps but its own view, policy, title and instructions, and its
// own telemetry middleware (telemetry, naming the server and the tools by
// the names it exposes, with their root names). It checks
// each view against the catalog as built: what no source offers fails the
// start, with every problem at once, except what an upstream not listed yet
// may still offer, which is logged.
func newVirtualServers(cfg *configFile, cat *catalog.Catalog, root mcp.Deps, telemetry observability.MCPOptions, logger *slog.Logger) ([]*virtualApp, error) {
	upstreams := make([]string, 0, len(cfg.Upstreams))
	for _, u := range cfg.Upstreams {
		upstreams = append(upstreams, u.Name)
	}
	var (
		out      []*virtualApp
		problems []error
	)
	for i := range cfg.Servers {
		vs := &cfg.Servers[i]
		view, err := vs.view()
		if err != nil {
			problems = append(problems, fmt.Errorf("servers[%d]: %w", i, err))
			continue
		}
		for _, p := range cat.ValidateView(view, upstreams) {
			key := fmt.Sprintf("servers[%d].%s", i, p.Key)
			if p.Warning {
				logger.Warn("a virtual server names what its upstream does not offer yet", "key", key, "problem", p.Message)
				continue
			}
			problems = append(problems, fmt.Errorf("%s: %s", key, p.Message))
		}
		deps := root
		deps.View = &view
		deps.Title = vs.Title
		deps.Instructions = vs.Instructions
		o := cfg.Auth
		o.Policy = vs.Auth.Policy
		deps.Policy = toolPolicy(o)
		deps.StepUp = nil
		if deps.Policy != nil {
			o.Resource, o.RequiredScopes = vs.Resource, vs.Auth.RequiredScopes
			deps.StepUp = stepUp(o, cfg.authOn())
		}
		var srv *mcp.Server // set before the server serves
		known := func(name string) bool { return srv.View().HasTool(name) }
		original := func(name string) string { return srv.View().Original(name) }
		tel := telemetry
		tel.Server = vs.Name
		tel.KnownTool, tel.OriginalTool = known, original
		deps.Middleware = append([]sdk.Middleware{observability.MCPMiddleware(tel)}, root.Middleware[1:]...)
		deps.Name = vs.Name
		if telemetry.Metrics != nil {
			deps.OnDenied = toolDeniedHook(logger, telemetry.Metrics, vs.Name, known, original)
			telemetry.Metrics.DeclareServer(vs.Name)
		}
		srv = mcp.New(cat, cfg.MCP, deps)
		out = append(out, &virtualApp{cfg: vs, server: srv})
	}
	if err := errors.Join(problems...); err != nil {
		return nil, fmt.Errorf("servers: %w", err)
	}
	return out, nil
}

// serverNames returns the names of the configured virtual servers.
func serverNames(cfg *configFile) []string {
	names := make([]string, 0, len(cfg.Servers))
	for _, s := range cfg.Servers {
		names = append(names, s.Name)
	}
	return names
}

// view returns the server's selections as the curation mechanism takes
// them.
func (s *virtualServer) view() (curation.View, error) {
	var v curation.View
	for i, t := range s.Tools {
		sel := curation.ToolSelection{Source: t.Source, Name: t.Name, ExposeAs: t.ExposeAs, Title: t.Title, Description: t.Description}
		if t.Annotations.set() {
			sel.Annotations = &curation.Annotations{
				ReadOnlyHint: t.Annotations.ReadOnlyHint, DestructiveHint: t.Annotations.DestructiveHint,
				IdempotentHint: t.Annotations.IdempotentHint, OpenWorldHint: t.Annotations.OpenWorldHint,
			}
		}
		for name, a := range t.Arguments {
			arg := curation.Argument{Description: a.Description}
			if len(a.Default) > 0 {
				if err := json.Unmarshal(a.Default, &arg.Default); err != nil {
					return v, fmt.Errorf("tools[%d].arguments.%s.default: %w", i, name, err)
				}
			}
			if sel.Arguments == nil {
				sel.Arguments = map[string]curation.Argument{}
			}
			sel.Arguments[name] = arg
		}
		for name, raw := range t.FixedArguments {
			var val any
			if err := json.Unmarshal(raw, &val); err != nil {
				return v, fmt.Errorf("tools[%d].fixed_arguments.%s: %w", i, name, err)
			}
			if sel.FixedArguments == nil {
				sel.FixedArguments = map[string]any{}
			}
			sel.FixedArguments[name] = val
		}
		v.Tools = append(v.Tools, sel)
	}
	for _, r := range s.Resources {
		v.Resources = append(v.Resources, curation.ResourceSelection{Source: r.Source, URI: r.URI, ExposeAs: r.ExposeAs, Title: r.Title, Description: r.Description})
	}
	for _, p := range s.Prompts {
		v.Prompts = append(v.Prompts, curation.PromptSelection{Source: p.Source, Name: p.Name, ExposeAs: p.ExposeAs, Title: p.Title, Description: p.Description})
	}
	return v, nil
}

// virtualRoutes builds the auth, limits and metadata of each virtual
// server. A server's token audience is its resource alone: the issuers'
// extra audiences (auth.issuers[].audiences, auth.introspection.audiences)
// stand for /mcp, and accepting them here would let a token for one server
// in at every other. With authorization_server on, the issuers hold its
// issuer (setupAuthServer runs before serve builds these), so each
// server's metadata names it and its guard verifies its tokens.
func (a *app) virtualRoutes(ctx context.Context, health *observability.Health, hook limits.Hook) ([]virtualRoute, error) {
	var out []virtualRoute
	for _, v := range a.virtual {
		o := a.cfg.Auth
		o.Resource, o.RequiredScopes, o.Policy = v.cfg.Resource, v.cfg.Auth.RequiredScopes, v.cfg.Auth.Policy
		o.ResourceName = cmp.Or(v.cfg.Title, o.ResourceName)
		o.Issuers = slices.Clone(o.Issuers)
		for i := range o.Issuers {
			o.Issuers[i].Audiences = nil
		}
		o.Introspection.Audiences = nil
		guard, err := authGuard(ctx, o, a.metrics, a.logger, health)
		if err != nil {
			return nil, fmt.Errorf("servers: %s: %w", v.cfg.Name, err)
		}
		lo := a.cfg.Limits
		lo.RatePerPrincipal, lo.BurstPerPrincipal = v.cfg.Limits.RatePerPrincipal, v.cfg.Limits.BurstPerPrincipal
		limiter, err := limits.New(lo, limits.Deps{Key: principalKey, Hook: hook})
		if err != nil {
			return nil, fmt.Errorf("servers: %s: %w", v.cfg.Name, err)
		}
		// Each server's rate buckets are its own, in Redis too.
		shareRateLimits(limiter, a.redis, a.cfg.Redis.KeyPrefix+"server:"+v.cfg.Name+":", a.logger)
		view := v.server.View()
		refusals := observability.Refusals(observability.RefusalOptions{
			Metrics: a.metrics, Tracing: a.tracing, Server: v.cfg.Name, KnownTool: view.HasTool, OriginalTool: view.Original,
		})
		r := virtualRoute{name: v.cfg.Name, path: v.cfg.Path, mcp: v.server.Handler(), auth: guard, refusals: refusals, limits: limiter.Middleware, resource: v.cfg.Resource}
		if o.Enabled() {
			r.metadata = auth.MetadataHandler(o)
		}
		out = append(out, r)
	}
	return out, nil
}
