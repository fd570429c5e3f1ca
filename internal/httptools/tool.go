package httptools

import (
	"net/http"
	"net/url"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/portcullis-mcp/portcullis/internal/httptools/spec"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// api is one configured API, ready to serve.
type api struct {
	opts *Options
	// client sends the requests with the API's own credential; nil when
	// its token is got for each caller, with callers' clients.
	client  *http.Client
	callers *callers
	// accounts gives each caller's connected account (oauth.grant
	// authorization_code); nil otherwise.
	accounts upstream.Accounts
	base     *url.URL
	basePath string // base's escaped path without its trailing '/'
	secrets  []string
}

// tool is one declared tool, ready to serve.
type tool struct {
	api    *api
	spec   spec.Tool
	schema *jsonschema.Resolved
	params map[string]spec.Param // by argument name
	path   []segment
}

// segment is one piece of a tool's path template: literal text, or the
// path param that fills it.
type segment struct {
	lit   string
	param string // the argument's name; lit is unused
}
