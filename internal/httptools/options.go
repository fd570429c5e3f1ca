package httptools

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/portcullis-mcp/portcullis/internal/httptools/spec"
	"github.com/portcullis-mcp/portcullis/internal/mcpname"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// Defaults of an API's keys.
const (
	DefaultTimeout          = 30 * time.Second
	DefaultMaxResponseBytes = 1 << 20
)

// Options configures one REST API whose declared tools Portcullis serves:
// an entry of the `http_apis:` list.
type Options struct {
	// Name identifies the API in logs, metrics and errors, and is the
	// source name servers[].tools[].source selects its tools by. Letters,
	// digits, '_', '-' and '.'; unique among APIs and upstreams.
	Name string `yaml:"name" schema:"required"`
	// Prefix namespaces the API's tools: a tool "get_pet" is served as
	// "<prefix>_get_pet". Unset means the name; an empty string serves the
	// tools' names unchanged.
	Prefix *string `yaml:"prefix"`
	// BaseURL is the API's root: each tool's path is appended to its path.
	BaseURL string `yaml:"base_url" schema:"required,url"`
	// AllowHosts are the hosts (host or host:port) a request, or a
	// redirect it is given, may go to. Default: base_url's host alone.
	AllowHosts []string `yaml:"allow_hosts"`
	// AllowPrivateAddresses lets the API's requests connect to loopback,
	// private, link-local and other non-public addresses (checked after
	// DNS resolution, for every connection). Off by default, which is
	// what an API on the public internet needs; turn it on for an
	// internal API, knowing that its tools then reach the private network.
	AllowPrivateAddresses bool `yaml:"allow_private_addresses"`
	// TLS configures how the API's certificate is verified.
	TLS TLSOptions `yaml:"tls"`
	// Timeout bounds each request, its response body included, unless the
	// tool sets its own. Default 30s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxResponseBytes bounds a response body: a larger one ends the call
	// with a tool error. Default 1048576 (1 MiB).
	MaxResponseBytes int64 `yaml:"max_response_bytes" schema:"min=0"`
	// Headers are sent with every request, for the API's own credential
	// (an API key header). Values should come from mounted files
	// (value_file). The caller's Authorization header is never sent, and
	// no argument may set one of these headers.
	Headers []upstream.NamedValue `yaml:"headers"`
	// OAuth gets the API an access token, sent as a bearer token, as for
	// an http upstream: Portcullis's own (grant client_credentials, the
	// default), one per caller got for the caller's token (grants
	// token_exchange, jwt_bearer, id_jag; id_jag's resource defaults to
	// base_url), which goes only to the token endpoint, or each caller's
	// connected account (grant authorization_code, without
	// connect_at_sign_in). Off while token_url is empty, but for
	// authorization_code.
	OAuth upstream.OAuthOptions `yaml:"oauth"`
	// Tools are the API's declared tools.
	Tools []spec.Tool `yaml:"tools"`
	// OpenAPI imports more tools from the API's OpenAPI document: the
	// operations it selects.
	OpenAPI *OpenAPIOptions `yaml:"openapi"`
}

// TLSOptions configures the verification of an API's certificate.
type TLSOptions struct {
	// CAFile is a PEM file of the certificate authorities the API's
	// certificate is verified against, instead of the system's.
	CAFile string `yaml:"ca_file"`
	// InsecureSkipVerify accepts any certificate: anyone on the path can
	// then read and change the requests, credentials included. Never in
	// production.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// Defaults fills zero values with defaults. Call it before [Validate].
func (o *Options) Defaults() {
	if o.Prefix == nil {
		p := o.Name
		o.Prefix = &p
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxResponseBytes == 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	o.OAuth.Defaults(o.BaseURL)
	if len(o.AllowHosts) == 0 {
		if u, err := url.Parse(o.BaseURL); err == nil && u.Host != "" {
			o.AllowHosts = []string{u.Host}
		}
	}
	for i := range o.Tools {
		defaultTool(&o.Tools[i], o.Name)
	}
}

// namespace is the prefix after Defaults.
func (o *Options) namespace() string {
	if o.Prefix == nil {
		return o.Name
	}
	return *o.Prefix
}

// ServedName returns the name the API's tool called name is served under
// on /mcp: "<prefix>_<name>", or name when the prefix is empty.
func (o *Options) ServedName(name string) string {
	if p := o.namespace(); p != "" {
		return p + "_" + name
	}
	return name
}

// methods are the methods a tool may use.
var methods = map[string]bool{http.MethodGet: true, http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true,
	http.MethodDelete: true, http.MethodHead: true, http.MethodOptions: true}

// reservedHeaders are set by Portcullis or the transport: no header param
// may name one.
var reservedHeaders = []string{"Authorization", "Proxy-Authorization", "Host", "Content-Length", "Content-Type",
	"Transfer-Encoding", "Connection", "Cookie", "Te", "Trailer", "Upgrade", "Keep-Alive", "Proxy-Connection", "Expect", "Forwarded",
	"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip"}

var (
	validHeaderName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	pathParam       = regexp.MustCompile(`\{([^{}]*)\}`)
)

// Validate reports every problem of the list at once, as an [errors.Join]
// of errors whose text starts with the key path ("[1].base_url: …"); the
// caller prefixes the section name ("http_apis"). taken names the
// sources the APIs' names and prefixes must not clash with (the
// upstreams'), by name and by prefix.
func Validate(list []Options, takenNames, takenPrefixes map[string]string) error {
	var errs []error
	sources := mcpname.Sources{Section: "http_apis", TakenNames: takenNames, TakenPrefixes: takenPrefixes}
	for i := range list {
		o := list[i]
		o.Defaults()
		at := func(key, format string, args ...any) {
			errs = append(errs, fmt.Errorf("[%d].%s: "+format, append([]any{i, key}, args...)...))
		}
		sources.Check(i, o.Name, o.namespace(), list[i].Prefix != nil, at)
		base, err := url.Parse(o.BaseURL)
		switch {
		case err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "":
			at("base_url", "%q must be an absolute http or https URL", o.BaseURL)
		case base.User != nil:
			at("base_url", "must not contain credentials: use headers with value_file")
		case base.Fragment != "":
			at("base_url", "must not have a fragment")
		}
		for k, h := range o.AllowHosts {
			if h == "" || strings.ContainsAny(h, "/?#@ ") {
				at(fmt.Sprintf("allow_hosts[%d]", k), "%q is not a host or host:port", h)
			}
		}
		if err == nil && base.Host != "" && !hostAllowed(o.AllowHosts, base.Scheme, base.Host) {
			at("allow_hosts", "must include base_url's host %s", base.Host)
		}
		if o.Timeout < 0 {
			at("timeout", "must not be negative")
		}
		if o.MaxResponseBytes < 0 {
			at("max_response_bytes", "must not be negative")
		}
		if o.TLS.CAFile != "" {
			if _, err := os.ReadFile(o.TLS.CAFile); err != nil {
				at("tls.ca_file", "%v", err)
			}
		}
		for _, err := range upstream.CheckCredentials(o.Headers, o.OAuth) {
			errs = append(errs, fmt.Errorf("[%d].%w", i, err))
		}
		fixed := map[string]bool{}
		for _, h := range o.Headers {
			fixed[http.CanonicalHeaderKey(h.Name)] = true
		}
		tools := map[string]int{}
		for k := range o.Tools {
			if j, dup := tools[o.Tools[k].Name]; dup {
				at(fmt.Sprintf("tools[%d].name", k), "%q is also the name of tools[%d]", o.Tools[k].Name, j)
			}
			tools[o.Tools[k].Name] = k
			for _, err := range checkTool(&o.Tools[k], fixed) {
				errs = append(errs, fmt.Errorf("[%d].tools[%d].%w", i, k, err))
			}
		}
		if p := o.OpenAPI; p != nil {
			for _, err := range p.check() {
				errs = append(errs, fmt.Errorf("[%d].openapi.%w", i, err))
			}
			// A document at a URL is fetched and checked when served.
			if p.File != "" && p.URL == "" {
				data, err := p.readFile()
				if err != nil {
					at("openapi", "%v", err)
				} else {
					_, _, bad := o.imported(data)
					for _, err := range bad {
						errs = append(errs, fmt.Errorf("[%d].%w", i, err))
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

// imported returns the tools data, o's document, selects, checked as
// Validate checks declared tools, and what of it is left out or renamed;
// errs are every problem, each starting with "openapi".
func (o *Options) imported(data []byte) (tools []spec.Tool, notes []string, errs []error) {
	tools, notes, err := o.OpenAPI.tools(o.Name, data)
	if err != nil {
		return nil, notes, []error{fmt.Errorf("openapi: %w", err)}
	}
	fixed := map[string]bool{}
	for _, h := range o.Headers {
		fixed[http.CanonicalHeaderKey(h.Name)] = true
	}
	declared := map[string]int{}
	for k, t := range o.Tools {
		declared[t.Name] = k
	}
	for k := range tools {
		t := &tools[k]
		if j, dup := declared[t.Name]; dup {
			errs = append(errs, fmt.Errorf("openapi: the operation %q is named like tools[%d]", t.Name, j))
		}
		for _, err := range checkTool(t, fixed) {
			errs = append(errs, fmt.Errorf("openapi: the operation %q: %w", t.Name, err))
		}
	}
	if len(errs) > 0 {
		return nil, notes, errs
	}
	return tools, notes, nil
}

// checkTool reports the problems of a tool after Defaults, each error's
// text starting with its key under the tool (".method: …"); fixed are the
// API's configured headers.
func checkTool(t *spec.Tool, fixed map[string]bool) []error {
	var errs []error
	at := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	if !mcpname.Valid(t.Name) {
		at("name", "%q must be 1 to 128 letters, digits, '_', '-' or '.'", t.Name)
	}
	if !methods[t.Method] {
		at("method", "%q is not one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS", t.Method)
	}
	if !strings.HasPrefix(t.Path, "/") || strings.ContainsAny(t.Path, "?#") {
		at("path", "%q must start with / and have no query or fragment (use query params)", t.Path)
	}
	switch t.Body {
	case spec.BodyJSON, spec.BodyForm, spec.BodyNone:
	default:
		at("body", "%q is not one of json, form, none", t.Body)
	}
	switch t.Result {
	case spec.ResultText, spec.ResultJSON:
	default:
		at("result", "%q is not one of text, json", t.Result)
	}
	if t.Timeout < 0 {
		at("timeout", "must not be negative")
	}
	inPath := map[string]bool{}
	for _, m := range pathParam.FindAllStringSubmatch(t.Path, -1) {
		inPath[m[1]] = true
	}
	args := map[string]bool{}
	wires := map[string]bool{}
	for k, p := range t.Params {
		key := fmt.Sprintf("params[%d]", k)
		if p.Name == "" {
			at(key+".name", "required")
		}
		if args[p.Name] {
			at(key+".name", "%q is mapped twice", p.Name)
		}
		args[p.Name] = true
		if wires[p.In+" "+p.Wire()] {
			at(key+".as", "%s %q is set by two params", p.In, p.Wire())
		}
		wires[p.In+" "+p.Wire()] = true
		switch p.In {
		case spec.InPath:
			if !inPath[p.Wire()] {
				at(key+".as", "path %q has no {%s}", t.Path, p.Wire())
			}
			delete(inPath, p.Wire())
		case spec.InQuery:
		case spec.InHeader:
			h := http.CanonicalHeaderKey(p.Wire())
			switch {
			case !validHeaderName.MatchString(p.Wire()):
				at(key+".as", "%q is not a valid header name", p.Wire())
			case fixed[h] || isReserved(h):
				at(key+".as", "%s is set by Portcullis or the API's headers: no argument may set it", h)
			}
		case spec.InBody:
			if t.Body == spec.BodyNone {
				at(key+".in", "body params need body json or form")
			}
		default:
			at(key+".in", "%q is not one of path, query, header, body", p.In)
		}
	}
	for name := range inPath {
		at("path", "{%s} has no path param", name)
	}
	for _, s := range []struct {
		key string
		raw json.RawMessage
	}{{"input_schema", t.InputSchema}, {"output_schema", t.OutputSchema}} {
		if len(s.raw) == 0 {
			continue
		}
		if _, err := resolveSchema(s.raw); err != nil {
			at(s.key, "%v", err)
		}
	}
	return errs
}

func isReserved(h string) bool {
	for _, r := range reservedHeaders {
		if h == r {
			return true
		}
	}
	return false
}

// resolveSchema decodes and resolves an object schema.
func resolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %v", err)
	}
	if s.Type != "object" {
		return nil, errors.New(`must be an object schema ("type": "object")`)
	}
	return s.Resolve(nil)
}
