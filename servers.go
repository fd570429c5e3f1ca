package portcullis

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/curation"
)

// The MCP listener's servers and paths: the root server at mcpPath, and
// each virtual server of the configuration's `servers:` list at its own
// path, beside the paths Portcullis serves itself.

// mcpPath is where the root MCP server is served.
const mcpPath = "/mcp"

// devIssuerPath is where --dev mounts its embedded issuer.
const devIssuerPath = "/dev-issuer"

// rootServerName is the server label of the root server at /mcp, which
// no virtual server may take.
const rootServerName = "root"

// reservedPaths are paths of the MCP listener no virtual server may be
// served at, nor under: the public endpoints, the authorization server's
// and the dev issuer's. Paths under /mcp are free; /mcp itself is the
// root server's.
var reservedPaths = []string{"/healthz", "/readyz", "/oauth", "/.well-known", devIssuerPath}

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
	// Exposure is what the server exposes of the catalog, and how: its
	// tools, resources and prompts keys.
	curation.Exposure `yaml:",inline"`
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

// defaults fills the defaults of s: a tool's or prompt's name "*", the
// resource from root (auth.resource, when it is set), and the rate and
// burst of the limits section.
func (s *virtualServer) defaults(root string, rate float64, burst int) {
	s.Exposure.Defaults()
	s.defaultResource(root)
	if s.Limits.RatePerPrincipal == 0 {
		s.Limits.RatePerPrincipal = rate
	}
	if s.Limits.BurstPerPrincipal == 0 {
		s.Limits.BurstPerPrincipal = burst
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

// validateServers reports every problem of the servers list that its own
// keys show, at once, each naming its key ("servers[1].tools[0].name: …"):
// the names, paths and resources, and what the selections of each expose
// ([curation.Exposure.Check], with the sources they may name). root is
// auth.resource. Whether a selected tool exists, has the arguments
// curated, accepts a fixed value, or clashes with another tool a pattern
// matches, is checked once the catalog and the upstreams are built; the
// servers' auth and limits, by the rules of those sections, where the
// configuration composes them.
func validateServers(servers []virtualServer, root string, sources curation.Sources) error {
	var errs []error
	names := map[string]int{}
	paths := map[string]int{}
	resources := map[string]int{}
	for i := range servers {
		s := &servers[i]
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
		if s.Resource != "" && (pathOK || s.Resource != resourceAt(root, s.Path)) {
			switch u, err := url.Parse(s.Resource); {
			case err != nil:
				// Reported by the auth check of the resource.
			case pathOK && u.Path != s.Path:
				at("resource", "%q must name the server's path %s", s.Resource, s.Path)
			case u.RawQuery != "":
				at("resource", "%q must not have a query", s.Resource)
			}
			key := strings.ToLower(s.Resource)
			if j, dup := resources[key]; dup {
				at("resource", "%q is also the resource of servers[%d]; a token for one would be accepted at the other", s.Resource, j)
			} else if strings.EqualFold(s.Resource, root) {
				at("resource", "%q is auth.resource, the root server's; a token for one would be accepted at the other", s.Resource)
			}
			resources[key] = i
		}
		for _, p := range s.Exposure.Check(sources) {
			at(p.Key, "%s", p.Message)
		}
	}
	return errors.Join(errs...)
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
