package toolsets

import (
	"fmt"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
)

// New returns a catalog holding what opts describe: [Add] on a new catalog.
func New(opts Options, deps Deps) (*catalog.Catalog, error) {
	deps = deps.withDefaults()
	c := catalog.New(deps.Logger)
	if err := Add(c, opts, deps); err != nil {
		return nil, err
	}
	return c, nil
}

// Add adds to c the toolsets opts enables and the resources and prompts
// it declares. opts should have passed [Options.Validate]; Add repeats the
// checks it depends on.
func Add(c *catalog.Catalog, opts Options, deps Deps) error {
	opts.Defaults()
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("tools: %w", err)
	}
	deps = deps.withDefaults()
	for _, set := range opts.Toolsets {
		switch set {
		case ToolsetCore:
			c.Add(coreTools(deps)...)
		case ToolsetWorkshop:
			c.Add(workshopTools(opts.Weather, deps)...)
		case ToolsetConformance:
			c.Add(conformanceTools(c)...)
			addConformanceContent(c)
		}
	}
	if err := addDeclared(c, opts.Resources, opts.Prompts); err != nil {
		return fmt.Errorf("tools: %w", err)
	}
	return nil
}
