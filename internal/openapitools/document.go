package openapitools

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Document is a loaded OpenAPI 3.0 or 3.1 document.
type Document struct {
	// OpenAPI is the document's version, as its openapi field writes it
	// ("3.0.3", "3.1.0").
	OpenAPI string
	// Title and Version are the document's info.title and info.version.
	Title, Version string
	// ServerURL is the URL of the document's first server, its variables
	// replaced by their defaults, as written: it may be relative to where
	// the document was fetched ("/api/v3"). It is "" when the document
	// names no server. Operations' paths do not include it.
	ServerURL string

	doc *openapi3.T
}

// Load parses an OpenAPI 3.0 or 3.1 document, JSON or YAML, resolves its
// $refs and validates it. A $ref to another file or a URL is an error:
// loading a document never reads or fetches anything else, so the caller
// bounds what it reads. Swagger 2.0 and OpenAPI 3.2 documents are errors.
func Load(data []byte) (*Document, error) {
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = false
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("openapitools: %w", err)
	}
	v := doc.OpenAPI
	if v == "" {
		return nil, errors.New("openapitools: the document has no openapi field: it is not an OpenAPI 3 document (Swagger 2.0 documents must be converted first)")
	}
	if !strings.HasPrefix(v, "3.0") && !strings.HasPrefix(v, "3.1") {
		return nil, fmt.Errorf("openapitools: OpenAPI %s is not supported: 3.0 and 3.1 are", v)
	}
	// Examples and defaults that do not match their schema are common in
	// published documents and harmless here: they are not checked. Nor
	// are patterns, which are ECMA-262 expressions Go's regexp may not
	// compile: the conversion leaves those out, with a problem.
	if err := doc.Validate(context.Background(),
		openapi3.DisableExamplesValidation(),
		openapi3.DisableSchemaDefaultsValidation(),
		openapi3.DisableSchemaPatternValidation(),
	); err != nil {
		return nil, fmt.Errorf("openapitools: the document is not valid: %w", err)
	}
	d := &Document{OpenAPI: v, doc: doc}
	if doc.Info != nil {
		d.Title, d.Version = doc.Info.Title, doc.Info.Version
	}
	if len(doc.Servers) > 0 && doc.Servers[0] != nil {
		d.ServerURL = serverURL(doc.Servers[0])
	}
	return d, nil
}

// serverURL returns the server's URL with each {variable} replaced by its
// default.
func serverURL(s *openapi3.Server) string {
	u := s.URL
	for name, v := range s.Variables {
		if v != nil {
			u = strings.ReplaceAll(u, "{"+name+"}", v.Default)
		}
	}
	return u
}

// openapi30 reports whether the document is OpenAPI 3.0, whose schemas
// write null as nullable rather than as a type.
func (d *Document) openapi30() bool {
	return strings.HasPrefix(d.OpenAPI, "3.0")
}
