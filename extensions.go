package portcullis

import (
	"fmt"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/tools"
)

// extensions is what a program built on Portcullis adds to the server
// through its [Option] values. The zero value adds nothing: the server is
// the portcullis binary.
type extensions struct {
	// Register add tools, resources and prompts to the catalog, after the
	// toolsets the configuration enables and before any server is built
	// from it, in order. An error stops the server from starting.
	Register []func(*tools.Catalog) error
}

// Apply runs every Register function on cat, seen as the tools.Catalog
// programs know. A panic (tools.AddTool panics on a duplicate name)
// becomes an error.
func (e extensions) Apply(cat *catalog.Catalog) error {
	return e.apply(catalog.View(cat).(*tools.Catalog))
}

// apply runs every Register function on c.
func (e extensions) apply(c *tools.Catalog) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("adding tools: %v", r)
		}
	}()
	for _, f := range e.Register {
		if err := f(c); err != nil {
			return err
		}
	}
	return nil
}
