package portcullis

import (
	"log/slog"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/httptools"
	"github.com/portcullis-mcp/portcullis/observability"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// registerHTTPAPIs serves the declared tools of the REST APIs of
// `http_apis:` (package internal/httptools) in cat, each API a source
// that servers[].tools[].source selects by its name. Their calls go
// through the same middleware as any tool's (policy, limits, metrics,
// spans, audit); their requests are traced.
func registerHTTPAPIs(apis []httptools.Options, cat *catalog.Catalog, tracing *observability.Tracing, logger *slog.Logger) error {
	if len(apis) == 0 {
		return nil
	}
	return httptools.Register(apis, cat, httptools.Deps{Logger: logger, Transport: tracing.Transport})
}

// validateHTTPAPIs reports the problems of http_apis, an API's name or
// prefix taken by one of the upstreams among them: a selection names
// either by it.
func validateHTTPAPIs(apis []httptools.Options, ups []upstream.Options) error {
	names, prefixes := map[string]string{}, map[string]string{}
	for i := range ups {
		u := ups[i]
		u.Defaults()
		names[u.Name] = "an upstream"
		if u.Prefix != nil && *u.Prefix != "" {
			prefixes[*u.Prefix] = "an upstream"
		}
	}
	return httptools.Validate(apis, names, prefixes)
}
