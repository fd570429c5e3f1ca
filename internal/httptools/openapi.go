package httptools

// Tools imported from an OpenAPI document (openapi:): the operations it
// selects, converted by internal/openapitools, served beside the declared
// tools and checked as they are.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/httptools/spec"
	"github.com/portcullis-mcp/portcullis/internal/openapitools"
)

// maxDocument bounds an OpenAPI document, read from its file or URL.
const maxDocument = 32 << 20

// DefaultReload is how often a document read from a URL is checked for
// changes, unless openapi.reload says otherwise.
const DefaultReload = 5 * time.Minute

// minReload bounds openapi.reload from below.
const minReload = time.Second

// OpenAPIOptions imports an API's tools from its OpenAPI 3.0 or 3.1
// document: each operation it selects becomes a tool named from its
// operationId, with an input schema of its parameters and body. Nothing
// is served unless selected. The requests go to base_url, never to the
// document's servers.
type OpenAPIOptions struct {
	// File is the document, JSON or YAML (a mounted ConfigMap). One of
	// file and url.
	File string `yaml:"file"`
	// URL is where the document is fetched from, over http or https:
	// at start (a document that cannot be fetched or used fails the
	// start), then every reload. It is fetched with the API's tls and
	// allow_private_addresses settings but never its credentials
	// (headers, oauth), and follows redirects only on its own host. One
	// of file and url.
	URL string `yaml:"url"`
	// Reload is how often the document at url is checked for changes
	// (its ETag, Last-Modified or content): a change rebuilds the API's
	// tools and tells connected clients their tool list changed; a
	// document that became unusable keeps the tools served and logs why.
	// Default 5m; at least 1s. Only with url.
	Reload time.Duration `yaml:"reload"`
	// Select chooses the operations: each list that is set narrows the
	// choice (an operation must match one entry of each); an empty
	// selection serves nothing.
	Select SelectOptions `yaml:"select"`
}

// SelectOptions choose the operations of a document.
type SelectOptions struct {
	// OperationIDs are operationIds.
	OperationIDs []string `yaml:"operation_ids"`
	// Tags are tags, an operation having any of them.
	Tags []string `yaml:"tags"`
	// Paths are path templates or globs ("/pets/*": one segment; "/pets/**":
	// any number).
	Paths []string `yaml:"paths"`
	// Methods are HTTP methods.
	Methods []string `yaml:"methods"`
}

// reload is how often the document is checked: Reload or its default
// for a URL, 0 for a file.
func (p *OpenAPIOptions) reload() time.Duration {
	switch {
	case p == nil || p.URL == "":
		return 0
	case p.Reload == 0:
		return DefaultReload
	}
	return p.Reload
}

// check reports the problems of p's keys, each error's text starting
// with its key under openapi (".url: …").
func (p *OpenAPIOptions) check() []error {
	var errs []error
	at := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	switch {
	case p.File == "" && p.URL == "":
		at("file", "one of file and url is required")
	case p.File != "" && p.URL != "":
		at("url", "set with file: one of file and url")
	}
	if p.URL != "" {
		u, err := url.Parse(p.URL)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			at("url", "%q must be an absolute http or https URL", p.URL)
		case u.User != nil:
			at("url", "must not contain credentials")
		}
	}
	switch {
	case p.Reload != 0 && p.URL == "":
		at("reload", "is for a document read from url")
	case p.Reload != 0 && p.Reload < minReload:
		at("reload", "%s is less than %s", p.Reload, minReload)
	}
	return errs
}

// readFile reads the document's file, bounded by maxDocument.
func (p *OpenAPIOptions) readFile() ([]byte, error) {
	f, err := os.Open(p.File)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxDocument+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxDocument {
		return nil, fmt.Errorf("%s is larger than %d bytes", p.File, maxDocument)
	}
	return data, nil
}

// where names the document in errors.
func (p *OpenAPIOptions) where() string {
	if p.URL != "" {
		return p.URL
	}
	return p.File
}

// tools returns the tools data, the document, selects for the API
// called api, with their defaults filled, and what of it is left out or
// renamed. An error is a document that cannot be used, or a selection
// that serves nothing.
func (p *OpenAPIOptions) tools(api string, data []byte) ([]spec.Tool, []string, error) {
	doc, err := openapitools.Load(data)
	if err != nil {
		return nil, nil, err
	}
	s := p.Select
	sel := openapitools.Selection{OperationIDs: s.OperationIDs, Tags: s.Tags, Paths: s.Paths, Methods: s.Methods}
	if sel.IsZero() {
		return nil, nil, errors.New("select: empty, which serves nothing: name operation_ids, tags, paths or methods")
	}
	ops, problems := doc.Operations(sel)
	var notes []string
	for _, p := range problems {
		notes = append(notes, p.String())
	}
	var tools []spec.Tool
	for _, op := range ops {
		t, err := toolOf(op)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: not served: %v", op.Name, err))
			continue
		}
		defaultTool(&t, api)
		tools = append(tools, t)
	}
	if len(tools) == 0 {
		return nil, notes, fmt.Errorf("select: no operation of %s is served (%s)", p.where(), strings.Join(notes, "; "))
	}
	return tools, notes, nil
}

// toolOf is the declared tool of an imported operation.
func toolOf(op openapitools.Operation) (spec.Tool, error) {
	in, err := json.Marshal(op.InputSchema)
	if err != nil {
		return spec.Tool{}, err
	}
	t := spec.Tool{Name: op.Name, Title: op.Title, Description: op.Description, Method: op.Method, Path: op.Path, InputSchema: in,
		Annotations: spec.Annotations{ReadOnly: op.Annotations.ReadOnly, Destructive: op.Annotations.Destructive, Idempotent: op.Annotations.Idempotent}}
	if op.OutputSchema != nil {
		if t.OutputSchema, err = json.Marshal(op.OutputSchema); err != nil {
			return spec.Tool{}, err
		}
	}
	switch op.Body {
	case openapitools.BodyJSON:
		if op.ContentType != "" && op.ContentType != "application/json" {
			return spec.Tool{}, fmt.Errorf("its body is %s, which is not sent yet", op.ContentType)
		}
		t.Body = spec.BodyJSON
	case openapitools.BodyForm:
		t.Body = spec.BodyForm
	default:
		t.Body = spec.BodyNone
	}
	for _, p := range op.Params {
		if p.In == openapitools.InBody && p.As == "" {
			return spec.Tool{}, errors.New("its request body is not an object, which is not sent yet")
		}
		if p.Style != "" && p.Style != defaultStyle(p.In) {
			return spec.Tool{}, fmt.Errorf("the parameter %q has style %s, which is not sent yet", p.As, p.Style)
		}
		// A query param's array goes as one comma-joined value when the
		// document says explode false; path and header params (simple
		// style) are joined either way.
		joined := p.In == openapitools.InQuery && !p.Explode
		t.Params = append(t.Params, spec.Param{Name: p.Name, In: p.In, As: p.As, Required: p.Required, Joined: joined})
	}
	return t, nil
}

// defaultStyle is OpenAPI's default serialization style of a parameter
// in in, the one requests are built with.
func defaultStyle(in string) string {
	switch in {
	case openapitools.InQuery:
		return "form"
	case openapitools.InBody:
		return ""
	}
	return "simple"
}

// defaultTool fills t's zero values with defaults; api names its API.
func defaultTool(t *spec.Tool, api string) {
	t.Method = strings.ToUpper(t.Method)
	if t.Body == "" {
		t.Body = spec.DefaultBody(t.Method)
	}
	if t.Result == "" {
		t.Result = spec.ResultText
	}
	if t.Description == "" {
		t.Description = fmt.Sprintf("%s %s of the %s API.", t.Method, t.Path, api)
	}
}
