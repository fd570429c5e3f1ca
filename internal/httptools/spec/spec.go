// Package spec is the neutral form of a declared HTTP tool: how one MCP
// tool call becomes one request to a REST API. The http_apis section of
// the configuration declares tools in it, the OpenAPI import produces it,
// and package httptools executes it. It imports nothing of Portcullis.
package spec

import (
	"encoding/json"
	"net/http"
	"time"
)

// Where a [Param] goes, accepted in [Param.In].
const (
	InPath   = "path"
	InQuery  = "query"
	InHeader = "header"
	InBody   = "body"
)

// Request body encodings accepted in [Tool.Body].
const (
	BodyJSON = "json"
	BodyForm = "form"
	BodyNone = "none"
)

// Result mappings accepted in [Tool.Result].
const (
	ResultText = "text"
	ResultJSON = "json"
)

// Tool is one declared HTTP tool: what the MCP client sees of it (name,
// title, description, annotations, schemas) and the request a call
// becomes (method, path, params, body).
type Tool struct {
	// Name is the tool's name in its API, served as "<prefix>_<name>".
	// Letters, digits, '_', '-' and '.'.
	Name string `yaml:"name" schema:"required"`
	// Title is the tool's human-readable name.
	Title string `yaml:"title"`
	// Description tells the model what the tool does and when to use it.
	// Unset: "<METHOD> <path> of the <api> API.", which tells it little.
	Description string `yaml:"description"`
	// Annotations are the tool's behaviour hints.
	Annotations Annotations `yaml:"annotations"`
	// InputSchema is the JSON Schema (an object schema) of the call's
	// arguments, checked before any request is made. Unset: an object
	// schema with one property per param, the required ones required.
	InputSchema json.RawMessage `yaml:"input_schema"`
	// OutputSchema is the JSON Schema of the structured content a JSON
	// response becomes. Optional.
	OutputSchema json.RawMessage `yaml:"output_schema"`
	// Method is the request's HTTP method (GET, POST, PUT, PATCH, DELETE,
	// HEAD, OPTIONS).
	Method string `yaml:"method" schema:"required"`
	// Path is the request's path under the API's base_url, with path
	// params in braces: /pets/{petId}. Each path param's value fills one
	// path segment, percent-encoded: it can never change the path's other
	// segments, nor the host.
	Path string `yaml:"path" schema:"required"`
	// Params map the call's arguments to the request. An argument no
	// param names goes into the body.
	Params []Param `yaml:"params"`
	// Body is how the body arguments are encoded: json (an object; the
	// default for POST, PUT and PATCH), form
	// (application/x-www-form-urlencoded) or none (the default for other
	// methods; an argument that would go into it is refused).
	Body string `yaml:"body" schema:"enum=json|form|none"`
	// Timeout bounds the request, response body included. Unset: the
	// API's timeout.
	Timeout time.Duration `yaml:"timeout"`
	// Result is how a successful response becomes the tool's result: text
	// (the body as text, and structured content too when the body is a
	// JSON object and an output schema is set) or json (the body must be
	// JSON; a JSON object is also the structured content). Default text.
	Result string `yaml:"result" schema:"enum=text|json"`
}

// Param maps one argument of a call to the request.
type Param struct {
	// Name is the argument's name in the input schema.
	Name string `yaml:"name" schema:"required"`
	// In is where its value goes: path, query, header or body.
	In string `yaml:"in" schema:"required,enum=path|query|header|body"`
	// As is its name on the wire (the query key, header name or body
	// member). Default: name.
	As string `yaml:"as"`
	// Required makes a call without the argument fail before any request
	// is made. Path params are always required.
	Required bool `yaml:"required"`
	// Joined sends an array argument of a query param as one value, its
	// elements joined by commas (tags=a,b: OpenAPI's form style with
	// explode false), instead of one key per element (tags=a&tags=b).
	Joined bool `yaml:"joined"`
}

// Wire returns the param's name on the wire: As, or Name.
func (p Param) Wire() string {
	if p.As != "" {
		return p.As
	}
	return p.Name
}

// Annotations are a tool's behaviour hints (MCP tool annotations). Unset
// ones are not sent.
type Annotations struct {
	// ReadOnly says the tool changes nothing.
	ReadOnly *bool `yaml:"read_only"`
	// Destructive says the tool may delete or overwrite.
	Destructive *bool `yaml:"destructive"`
	// Idempotent says calling it again with the same arguments changes
	// nothing more.
	Idempotent *bool `yaml:"idempotent"`
	// OpenWorld says the tool reaches beyond a closed domain.
	OpenWorld *bool `yaml:"open_world"`
}

// DefaultBody returns the body encoding of a method when [Tool.Body] is
// unset: json for POST, PUT and PATCH, none for the others.
func DefaultBody(method string) string {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		return BodyJSON
	}
	return BodyNone
}
