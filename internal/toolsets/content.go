package toolsets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"unicode/utf8"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/mcpname"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"
)

// maxDeclaredFile bounds the size of a file a resource or prompt names.
const maxDeclaredFile = 1 << 20

// ResourceSpec declares a resource in config: a fixed URI, or a URI template
// whose variables are substituted into the text as {{name}} placeholders.
// Its content is inline text or a file read once, when the catalog is built.
//
//	resources:
//	  - uri: docs://handbook/oncall
//	    name: oncall
//	    title: On-call handbook
//	    file: /etc/portcullis/oncall.md
//	  - uri_template: greeting://{lang}/{name}
//	    name: greeting
//	    text: "Hello {{name}} ({{lang}})"
//	    completions:
//	      - {variable: lang, values: [en, fr, de]}
type ResourceSpec struct {
	// URI is the resource's absolute URI. Exactly one of URI and URITemplate.
	URI string `yaml:"uri"`
	// URITemplate is an RFC 6570 URI template, making this a resource
	// template. Exactly one of URI and URITemplate.
	URITemplate string `yaml:"uri_template"`
	// Name identifies the resource; required.
	Name string `yaml:"name" schema:"required"`
	// Title is a display name.
	Title string `yaml:"title"`
	// Description tells the model what the resource holds.
	Description string `yaml:"description"`
	// MIMEType of the content. Empty means "text/plain" for Text, and for a
	// File the type its extension implies, else text/plain (or
	// application/octet-stream when the file is not UTF-8 text).
	MIMEType string `yaml:"mime_type"`
	// Text is the content inline. Exactly one of Text and File.
	Text string `yaml:"text"`
	// File is the path of a file holding the content, at most 1 MiB.
	File string `yaml:"file"`
	// Completions offers values for URI template variables to clients that
	// ask (completion/complete).
	Completions []CompletionSpec `yaml:"completions"`
}

// CompletionSpec lists the values offered for one URI template variable.
type CompletionSpec struct {
	// Variable is the name of a variable of the URI template.
	Variable string `yaml:"variable"`
	// Values are offered, in this order, when they start with what the user
	// typed (ignoring case).
	Values []string `yaml:"values"`
}

// PromptSpec declares a prompt in config: one message whose text may hold
// {{argument}} placeholders, replaced by the arguments the client passes
// (an optional argument that is absent becomes empty).
//
//	prompts:
//	  - name: summarize
//	    title: Summarize a document
//	    description: Summarize text for a given audience.
//	    arguments:
//	      - {name: text, description: The text to summarize, required: true}
//	      - {name: audience, completions: [engineers, executives]}
//	    text: "Summarize the following for {{audience}}:\n\n{{text}}"
type PromptSpec struct {
	// Name identifies the prompt; required, letters, digits, '_', '-', '.'.
	Name string `yaml:"name" schema:"required"`
	// Title is a display name.
	Title string `yaml:"title"`
	// Description tells the user what the prompt is for.
	Description string `yaml:"description"`
	// Arguments the prompt accepts.
	Arguments []PromptArgumentSpec `yaml:"arguments"`
	// Role of the message: "user" (empty means user) or "assistant".
	Role string `yaml:"role" schema:"enum=user|assistant"`
	// Text is the message template inline. Exactly one of Text and File.
	Text string `yaml:"text"`
	// File is the path of a UTF-8 file holding the message template, at
	// most 1 MiB, read once when the catalog is built.
	File string `yaml:"file"`
}

// PromptArgumentSpec declares one prompt argument.
type PromptArgumentSpec struct {
	// Name is the argument's name, used as {{name}} in the text; required,
	// letters, digits and '_', not starting with a digit.
	Name string `yaml:"name" schema:"required"`
	// Title is a display name.
	Title string `yaml:"title"`
	// Description tells the user what to pass.
	Description string `yaml:"description"`
	// Required arguments must be passed to get the prompt.
	Required bool `yaml:"required"`
	// Completions are values offered to clients that ask
	// (completion/complete).
	Completions []string `yaml:"completions"`
}

var (
	placeholderRE = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)
	argNameRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	uriSchemeRE   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// fill replaces the {{name}} placeholders of s with values[name].
func fill(s string, values map[string]string) string {
	return placeholderRE.ReplaceAllStringFunc(s, func(m string) string {
		return values[placeholderRE.FindStringSubmatch(m)[1]]
	})
}

// placeholders returns the names the {{name}} placeholders of s use.
func placeholders(s string) []string {
	var names []string
	for _, m := range placeholderRE.FindAllStringSubmatch(s, -1) {
		names = append(names, m[1])
	}
	return names
}

// readDeclared reads a file a resource or prompt names.
func readDeclared(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDeclaredFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxDeclaredFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxDeclaredFile)
	}
	return b, nil
}

// body returns the text or file content of a declaration, checking that
// exactly one is given.
func body(text, file string) ([]byte, error) {
	switch {
	case text != "" && file != "":
		return nil, errors.New("set text or file, not both")
	case file != "":
		return readDeclared(file)
	case text != "":
		return []byte(text), nil
	}
	return nil, errors.New("set text or file")
}

func validateResources(specs []ResourceSpec) []error {
	var errs []error
	seen := map[string]int{}
	for i, r := range specs {
		at := func(key, format string, args ...any) {
			errs = append(errs, fmt.Errorf("resources[%d]%s: %s", i, key, fmt.Sprintf(format, args...)))
		}
		if r.Name == "" {
			at(".name", "required")
		}
		var vars []string
		switch {
		case r.URI != "" && r.URITemplate != "":
			at("", "set uri or uri_template, not both")
		case r.URI != "":
			if u, err := url.Parse(r.URI); err != nil || u.Scheme == "" {
				at(".uri", "must be an absolute URI with a scheme, such as docs://handbook")
			}
		case r.URITemplate != "":
			t, err := uritemplate.New(r.URITemplate)
			if err != nil {
				at(".uri_template", "%v", err)
			} else if !uriSchemeRE.MatchString(r.URITemplate) {
				at(".uri_template", "must start with a scheme, such as docs://{name}")
			} else {
				vars = t.Varnames()
			}
		default:
			at("", "set uri or uri_template")
		}
		if key := r.URI + r.URITemplate; key != "" {
			if j, dup := seen[key]; dup {
				at("", "same uri as resources[%d]", j)
			}
			seen[key] = i
		}
		if r.MIMEType != "" {
			if _, _, err := mime.ParseMediaType(r.MIMEType); err != nil {
				at(".mime_type", "%v", err)
			}
		}
		key := ".text"
		if r.File != "" {
			key = ".file"
		}
		content, err := body(r.Text, r.File)
		if err != nil {
			at(key, "%v", err)
		} else if vars != nil {
			for _, name := range placeholders(string(content)) {
				if !slices.Contains(vars, name) {
					at(key, "placeholder {{%s}} is not a variable of the uri_template (%v)", name, vars)
				}
			}
		}
		for j, comp := range r.Completions {
			if r.URITemplate == "" {
				at(".completions", "only a uri_template resource has variables to complete")
				break
			}
			if vars != nil && !slices.Contains(vars, comp.Variable) {
				at(fmt.Sprintf(".completions[%d].variable", j), "%q is not a variable of the uri_template (%v)", comp.Variable, vars)
			}
		}
	}
	return errs
}

func validatePrompts(specs []PromptSpec) []error {
	var errs []error
	seen := map[string]int{}
	for i, p := range specs {
		at := func(key, format string, args ...any) {
			errs = append(errs, fmt.Errorf("prompts[%d]%s: %s", i, key, fmt.Sprintf(format, args...)))
		}
		switch {
		case p.Name == "":
			at(".name", "required")
		case !mcpname.Valid(p.Name):
			at(".name", "%q: use at most 128 letters, digits, '_', '-' or '.'", p.Name)
		}
		if j, dup := seen[p.Name]; dup && p.Name != "" {
			at(".name", "%q is also the name of prompts[%d]", p.Name, j)
		}
		seen[p.Name] = i
		if p.Role != "" && p.Role != "user" && p.Role != "assistant" {
			at(".role", "%q: must be user or assistant", p.Role)
		}
		args := map[string]bool{}
		for j, a := range p.Arguments {
			switch {
			case !argNameRE.MatchString(a.Name):
				at(fmt.Sprintf(".arguments[%d].name", j), "%q: use letters, digits and '_', not starting with a digit", a.Name)
			case args[a.Name]:
				at(fmt.Sprintf(".arguments[%d].name", j), "%q is declared twice", a.Name)
			}
			args[a.Name] = true
		}
		key := ".text"
		if p.File != "" {
			key = ".file"
		}
		content, err := body(p.Text, p.File)
		switch {
		case err != nil:
			at(key, "%v", err)
		case !utf8.Valid(content):
			at(key, "not UTF-8 text")
		default:
			for _, name := range placeholders(string(content)) {
				if !args[name] {
					at(key, "placeholder {{%s}} is not a declared argument", name)
				}
			}
		}
	}
	return errs
}

// addDeclared adds the resources and prompts declared in config.
func addDeclared(c *catalog.Catalog, resources []ResourceSpec, prompts []PromptSpec) error {
	for _, r := range resources {
		content, err := body(r.Text, r.File)
		if err != nil {
			return err
		}
		mimeType := r.MIMEType
		if mimeType == "" && r.File != "" {
			mimeType = mime.TypeByExtension(filepath.Ext(r.File))
		}
		if mimeType == "" {
			mimeType = "text/plain"
			if !utf8.Valid(content) {
				mimeType = "application/octet-stream"
			}
		}
		if r.URI != "" {
			c.AddResource(&sdk.Resource{URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: mimeType, Size: int64(len(content))},
				staticResource(mimeType, content))
			continue
		}
		tmpl, err := uritemplate.New(r.URITemplate)
		if err != nil {
			return err
		}
		c.AddTemplate(&sdk.ResourceTemplate{URITemplate: r.URITemplate, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: mimeType},
			templatedResource(tmpl, mimeType, string(content)))
		for _, comp := range r.Completions {
			c.AddCompletions("ref/resource", r.URITemplate, comp.Variable, comp.Values)
		}
	}
	for _, p := range prompts {
		content, err := body(p.Text, p.File)
		if err != nil {
			return err
		}
		sp := &sdk.Prompt{Name: p.Name, Title: p.Title, Description: p.Description}
		for _, a := range p.Arguments {
			sp.Arguments = append(sp.Arguments, &sdk.PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
			c.AddCompletions("ref/prompt", p.Name, a.Name, a.Completions)
		}
		c.AddPrompt(sp, declaredPrompt(p, string(content)))
	}
	return nil
}

// resourceContents is the content of a resource: text when it is UTF-8,
// else a blob.
func resourceContents(uri, mimeType string, content []byte) *sdk.ResourceContents {
	rc := &sdk.ResourceContents{URI: uri, MIMEType: mimeType}
	if utf8.Valid(content) {
		rc.Text = string(content)
	} else {
		rc.Blob = content
	}
	return rc
}

func staticResource(mimeType string, content []byte) sdk.ResourceHandler {
	return func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{resourceContents(req.Params.URI, mimeType, content)}}, nil
	}
}

// templatedResource serves text with the URI's template variables in place
// of its {{name}} placeholders.
func templatedResource(tmpl *uritemplate.Template, mimeType, text string) sdk.ResourceHandler {
	return func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		uri := req.Params.URI
		m := tmpl.Match(uri)
		if m == nil {
			return nil, sdk.ResourceNotFoundError(uri)
		}
		values := map[string]string{}
		for _, name := range tmpl.Varnames() {
			values[name] = m.Get(name).String()
		}
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: mimeType, Text: fill(text, values)}}}, nil
	}
}

// declaredPrompt fills the message template with the request's arguments.
// A missing required argument is the client's mistake: invalid params.
func declaredPrompt(p PromptSpec, text string) sdk.PromptHandler {
	role := sdk.Role("user")
	if p.Role != "" {
		role = sdk.Role(p.Role)
	}
	return func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		args := req.Params.Arguments
		for _, a := range p.Arguments {
			if a.Required && args[a.Name] == "" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("prompt %q needs the argument %q", p.Name, a.Name)}
			}
		}
		return &sdk.GetPromptResult{
			Description: p.Description,
			Messages:    []*sdk.PromptMessage{{Role: role, Content: &sdk.TextContent{Text: fill(text, args)}}},
		}, nil
	}
}
