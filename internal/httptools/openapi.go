package httptools

// Tools imported from an OpenAPI document (openapi:): the operations it
// selects, converted by internal/openapitools, served beside the declared
// tools and checked as they are.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/portcullis-mcp/portcullis/internal/httptools/spec"
	"github.com/portcullis-mcp/portcullis/internal/openapitools"
)

// maxDocument bounds an OpenAPI document's file.
const maxDocument = 32 << 20

// OpenAPIOptions imports an API's tools from its OpenAPI 3.0 or 3.1
// document: each operation it selects becomes a tool named from its
// operationId, with an input schema of its parameters and body. Nothing
// is served unless selected. The requests go to base_url, never to the
// document's servers.
type OpenAPIOptions struct {
	// File is the document, JSON or YAML (a mounted ConfigMap).
	File string `yaml:"file" schema:"required"`
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

// tools returns the tools the document of the API called api selects
// (none for a nil p), with their defaults filled, and what of it is left
// out or renamed. An error is a document that cannot be read or used, or
// a selection that serves nothing.
func (p *OpenAPIOptions) tools(api string) ([]spec.Tool, []string, error) {
	if p == nil {
		return nil, nil, nil
	}
	f, err := os.Open(p.File)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxDocument+1))
	if err != nil {
		return nil, nil, err
	}
	if len(data) > maxDocument {
		return nil, nil, fmt.Errorf("%s is larger than %d bytes", p.File, maxDocument)
	}
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
		return nil, notes, fmt.Errorf("select: no operation of %s is served (%s)", p.File, strings.Join(notes, "; "))
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
		t.Params = append(t.Params, spec.Param{Name: p.Name, In: p.In, As: p.As, Required: p.Required})
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
