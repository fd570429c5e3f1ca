package toolsets

import (
	"fmt"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/curation"
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
// checks it depends on. What a toolset adds has the toolset's name as its
// source, the declared resources and prompts [curation.SourceDeclared];
// what c adds afterwards has the source it had before.
func Add(c *catalog.Catalog, opts Options, deps Deps) error {
	opts.Defaults()
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("tools: %w", err)
	}
	deps = deps.withDefaults()
	prev := c.SetOrigin("")
	defer c.SetOrigin(prev)
	for _, set := range opts.Toolsets {
		c.SetOrigin(set)
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
	c.SetOrigin(curation.SourceDeclared)
	if err := addDeclared(c, opts.Resources, opts.Prompts); err != nil {
		return fmt.Errorf("tools: %w", err)
	}
	return nil
}
