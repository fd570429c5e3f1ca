package upstream

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/mcpname"
)

// Transports accepted in [Options.Transport].
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// Isolation modes accepted in [Options.Isolation].
const (
	// IsolationShared runs one process that every caller shares.
	IsolationShared = "shared"
	// IsolationPerPrincipal runs one process per caller (token issuer,
	// subject and client), started on its first request and stopped when
	// idle; a shared process is still run to list what the server offers.
	IsolationPerPrincipal = "per_principal"
)

// Ways of passing the caller's identity accepted in [Options.PassPrincipal].
const (
	PassPrincipalNone = "none"
	PassPrincipalEnv  = "env"
	PassPrincipalMeta = "meta"
)

// MetaKeyPrincipal is the _meta key under which a call carries the
// caller's identity with pass_principal: meta.
const MetaKeyPrincipal = "io.portcullis/principal"

// Defaults of the per_principal isolation.
const (
	DefaultMaxProcesses = 16
	DefaultIdleTimeout  = 10 * time.Minute
)

// DefaultStopGrace is how long a stdio server gets to exit after its stdin
// closes, and again after SIGTERM, before it is killed.
const DefaultStopGrace = 5 * time.Second

// Options configures one upstream MCP server: an entry of the `upstreams:`
// list.
type Options struct {
	// Name identifies the upstream in logs, metrics and errors. Letters,
	// digits, '_', '-' and '.'; unique among upstreams.
	Name string `yaml:"name" schema:"required"`
	// Prefix namespaces the upstream's tools and prompts: an upstream tool
	// "search" is served as "<prefix>_search". Unset means the name; an
	// empty string serves the upstream's names unchanged. Resource URIs are
	// served as the upstream names them, except the ui:// URIs of MCP Apps,
	// served under the prefix (ui://app/x.html as ui://<prefix>/app/x.html)
	// so that two upstreams' Apps never share one; an App still calls its
	// upstream's tools by the upstream's names (docs/apps.md).
	Prefix *string `yaml:"prefix"`
	// Transport is stdio (a child process Portcullis starts) or http (a
	// Streamable HTTP endpoint).
	Transport string `yaml:"transport" schema:"required,enum=stdio|http"`
	// Required makes /readyz fail while the upstream is not connected.
	Required bool `yaml:"required"`
	// Allow lists the upstream's tool names (before prefixing) that are
	// served; empty means all. Entries may be patterns: "*" matches any
	// run of characters, "?" one character, [a-z] one of a class ("get_*").
	Allow []string `yaml:"allow"`
	// Deny lists upstream tool names (or patterns) that are never served,
	// whatever Allow says.
	Deny []string `yaml:"deny"`
	// AppsExtension makes Portcullis declare the MCP Apps extension
	// (io.modelcontextprotocol/ui, showing text/html;profile=mcp-app) in
	// its sessions with the upstream, so that an upstream that offers its
	// Apps' tools only to hosts that render Apps offers them. On the
	// 2025-11-25 era one session serves every caller, those whose hosts
	// render no App too, which get the text result every App's tool must
	// also give; on 2026-07-28 each call carries its caller's own
	// capabilities instead, the extension included when the caller
	// declared it. Default true.
	AppsExtension *bool `yaml:"apps_extension"`

	// Command is the stdio server's program (stdio only), found on PATH if
	// it has no slash.
	Command string `yaml:"command"`
	// Args are the program's arguments (stdio only).
	Args []string `yaml:"args"`
	// Env sets environment variables of the stdio server; it inherits no
	// other variable of Portcullis but PATH and HOME. A value may come from
	// a mounted file (value_file) so that secrets stay out of the config.
	Env []NamedValue `yaml:"env"`
	// EnvFiles are files of KEY=VALUE lines (blank lines and # comments
	// ignored) added to the stdio server's environment before Env.
	EnvFiles []string `yaml:"env_files"`
	// Dir is the stdio server's working directory. Empty means Portcullis's.
	Dir string `yaml:"dir"`
	// Isolation is how callers share the upstream: "shared", one stdio
	// process or HTTP session for every caller, so its state (files it
	// writes, memory it keeps, the account it acts as) is shared by all; or
	// "per_principal", one process or HTTP session per caller with a
	// token, started on its first request. A stdio process gets the same
	// env and credentials either way: per_principal separates the callers'
	// state, not their rights upstream. The default is per_principal for
	// an http upstream with oauth.grant token_exchange, which requires it,
	// and shared otherwise.
	Isolation string `yaml:"isolation" schema:"enum=shared|per_principal"`
	// MaxProcesses bounds the per_principal processes (or HTTP sessions)
	// running at once; a new caller then replaces the longest idle one, or
	// is told to retry. Default 16.
	MaxProcesses int `yaml:"max_processes" schema:"min=0"`
	// IdleTimeout stops a per_principal process (or HTTP session, with its
	// cached token) after this long without requests. Default 10m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// PassPrincipal gives the stdio server the verified identity of the
	// caller — issuer, subject, client id and scopes, never a token:
	// "env" sets MCP_PRINCIPAL_ISSUER, MCP_PRINCIPAL_SUBJECT,
	// MCP_PRINCIPAL_CLIENT_ID and MCP_PRINCIPAL_SCOPES (space-separated)
	// in the environment of each per_principal process as it starts
	// (per_principal only); "meta" adds it to each tools/call's _meta under
	// "io.portcullis/principal" as {issuer, subject, client_id, scopes};
	// "none", the default, passes nothing.
	PassPrincipal string `yaml:"pass_principal" schema:"enum=none|env|meta"`
	// StopGrace is how long the stdio server gets to exit when Portcullis
	// stops, first after its stdin closes, then after SIGTERM, before it is
	// killed. Default 5s.
	StopGrace time.Duration `yaml:"stop_grace"`

	// URL is the http upstream's MCP endpoint (http only).
	URL string `yaml:"url" schema:"url"`
	// Headers are sent with every request to the http upstream, for its own
	// credentials (an API key header). Values should come from mounted
	// files (value_file). The caller's Authorization header is never sent.
	Headers []NamedValue `yaml:"headers"`
	// OAuth gets the http upstream an access token and sends it as a
	// bearer token: Portcullis's own (grant client_credentials), or one per
	// caller got for the caller's token (grants token_exchange,
	// jwt_bearer, id_jag). Off while token_url is empty.
	OAuth OAuthOptions `yaml:"oauth"`
}

// Defaults fills zero values with defaults. Call it before [Validate].
func (o *Options) Defaults() {
	if o.Prefix == nil {
		p := o.Name
		o.Prefix = &p
	}
	if o.Transport == TransportStdio && o.Isolation == "" {
		o.Isolation = IsolationShared
		if o.OAuth.account() {
			o.Isolation = IsolationPerPrincipal
		}
	}
	if o.Transport == TransportHTTP {
		o.OAuth.Defaults(o.URL)
	}
	if o.Transport == TransportHTTP && o.Isolation == "" {
		o.Isolation = IsolationShared
		if o.OAuth.exchange() || o.OAuth.account() {
			o.Isolation = IsolationPerPrincipal
		}
	}
	if o.Transport == TransportStdio && o.PassPrincipal == "" {
		o.PassPrincipal = PassPrincipalNone
	}
	if o.StopGrace == 0 {
		o.StopGrace = DefaultStopGrace
	}
	if o.Isolation == IsolationPerPrincipal {
		if o.MaxProcesses == 0 {
			o.MaxProcesses = DefaultMaxProcesses
		}
		if o.IdleTimeout == 0 {
			o.IdleTimeout = DefaultIdleTimeout
		}
	}
}

// declaresApps reports whether Portcullis's sessions with the upstream
// declare the MCP Apps extension (AppsExtension, true when unset).
func (o *Options) declaresApps() bool { return o.AppsExtension == nil || *o.AppsExtension }

// namespace is the prefix after Defaults.
func (o *Options) namespace() string {
	if o.Prefix == nil {
		return o.Name
	}
	return *o.Prefix
}

// ServedName returns the name the upstream's tool or prompt called name
// is served under on /mcp: "<prefix>_<name>", or name when the prefix is
// empty.
func (o *Options) ServedName(name string) string {
	return servedName(o.namespace(), name)
}

func servedName(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "_" + name
}

// Validate reports every problem of the list at once, as an [errors.Join]
// of errors whose text starts with the key path ("[1].url: …"); the caller
// prefixes the section name ("upstreams").
func Validate(list []Options) error {
	var errs []error
	sources := mcpname.Sources{Section: "upstreams"}
	for i := range list {
		o := list[i]
		o.Defaults()
		at := func(key, format string, args ...any) {
			errs = append(errs, fmt.Errorf("[%d].%s: "+format, append([]any{i, key}, args...)...))
		}
		sources.Check(i, o.Name, o.namespace(), list[i].Prefix != nil, at)
		for k, pat := range o.Allow {
			if _, err := path.Match(pat, ""); err != nil {
				at(fmt.Sprintf("allow[%d]", k), "bad pattern %q", pat)
			}
		}
		for k, pat := range o.Deny {
			if _, err := path.Match(pat, ""); err != nil {
				at(fmt.Sprintf("deny[%d]", k), "bad pattern %q", pat)
			}
		}
		stdioSet := o.Command != "" || len(o.Args) > 0 || len(o.Env) > 0 || len(o.EnvFiles) > 0 || o.Dir != ""
		switch o.Transport {
		case TransportStdio:
			if o.Command == "" {
				at("command", "required for transport stdio")
			}
			if o.Isolation != IsolationShared && o.Isolation != IsolationPerPrincipal {
				at("isolation", "%q is not one of shared, per_principal", o.Isolation)
			}
			if o.Isolation != IsolationPerPrincipal && (list[i].MaxProcesses != 0 || list[i].IdleTimeout != 0) {
				at("isolation", "max_processes and idle_timeout apply only to per_principal")
			}
			if o.MaxProcesses < 0 || o.IdleTimeout < 0 {
				at("isolation", "max_processes and idle_timeout must not be negative")
			}
			if o.URL != "" || len(o.Headers) > 0 {
				at("transport", "stdio takes no url or headers")
			}
			if o.OAuth.set() {
				o.OAuth.checkStdioAccount(o.Isolation == IsolationPerPrincipal, at)
			}
			switch o.PassPrincipal {
			case PassPrincipalNone, PassPrincipalMeta:
			case PassPrincipalEnv:
				if o.Isolation != IsolationPerPrincipal {
					at("pass_principal", "env needs isolation per_principal: a shared process serves every caller")
				}
			default:
				at("pass_principal", "%q is not one of none, env, meta", o.PassPrincipal)
			}
			for k, e := range o.Env {
				errs = append(errs, checkNamedValue(fmt.Sprintf("[%d].env[%d]", i, k), e, validEnvName)...)
			}
			for k, f := range o.EnvFiles {
				if _, err := readEnvFile(f); err != nil {
					at(fmt.Sprintf("env_files[%d]", k), "%v", err)
				}
			}
		case TransportHTTP:
			if err := checkURL(o.URL); err != nil {
				at("url", "%v", err)
			}
			if stdioSet || o.PassPrincipal != "" {
				at("transport", "http takes no command, args, env, env_files, dir or pass_principal")
			}
			switch o.Isolation {
			case IsolationShared:
				if o.OAuth.exchange() || o.OAuth.account() {
					at("isolation", "shared cannot be used with oauth.grant %s: a shared HTTP session cannot carry each caller's token; use per_principal (the default with %[1]s)", o.OAuth.Grant)
				}
			case IsolationPerPrincipal:
			default:
				at("isolation", "%q is not one of shared, per_principal", o.Isolation)
			}
			if o.Isolation != IsolationPerPrincipal && (list[i].MaxProcesses != 0 || list[i].IdleTimeout != 0) {
				at("isolation", "max_processes and idle_timeout apply only to per_principal")
			}
			if o.MaxProcesses < 0 || o.IdleTimeout < 0 {
				at("isolation", "max_processes and idle_timeout must not be negative")
			}
			if o.OAuth.TokenEnv != "" || o.OAuth.TokenFileEnv != "" {
				at("oauth.token_env", "token_env and token_file_env apply only to stdio upstreams: an http upstream is sent the token")
			}
			if o.OAuth.account() {
				o.OAuth.checkAccount(at)
			} else if o.OAuth.enabled() {
				o.OAuth.checkGrant(at)
				for k, h := range o.Headers {
					if strings.EqualFold(h.Name, "Authorization") {
						at(fmt.Sprintf("headers[%d].name", k), "Authorization comes from oauth; set one or the other")
					}
				}
			} else if o.OAuth.set() {
				at("oauth.token_url", "required when other oauth keys are set")
			}
			for k, h := range o.Headers {
				errs = append(errs, checkNamedValue(fmt.Sprintf("[%d].headers[%d]", i, k), h, validHeaderName)...)
				if strings.EqualFold(h.Name, "Mcp-Session-Id") || strings.EqualFold(h.Name, "Mcp-Protocol-Version") {
					at(fmt.Sprintf("headers[%d].name", k), "%s is set by the transport itself", h.Name)
				}
			}
		default:
			at("transport", "%q is not one of stdio, http", o.Transport)
		}
		if o.StopGrace < 0 {
			at("stop_grace", "must not be negative")
		}
	}
	return errors.Join(errs...)
}

// allowed reports whether the upstream tool called name is served.
func (o *Options) allowed(name string) bool {
	match := func(pats []string) bool {
		return slices.ContainsFunc(pats, func(p string) bool {
			ok, _ := path.Match(p, name)
			return ok
		})
	}
	if match(o.Deny) {
		return false
	}
	return len(o.Allow) == 0 || match(o.Allow)
}
