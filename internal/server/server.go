// Package server is the portcullis program: its commands and flags, the
// configuration composed from every package's Options, the wiring of
// tools, auth, limits and telemetry around the MCP handler, and the
// process lifecycle (listen, serve, drain).
//
// It is internal: programs use it through the module's root package,
// github.com/portcullis-mcp/portcullis, which is also what cmd/server is
// built on.
package server

import (
	"fmt"

	"github.com/portcullis-mcp/portcullis/tools"
)

// Extensions is what a program built on Portcullis adds to the server.
// The zero value adds nothing: the server is the portcullis binary.
type Extensions struct {
	// Register add tools, resources and prompts to the catalog, after the
	// toolsets the configuration enables and before any server is built
	// from it, in order. An error stops the server from starting.
	Register []func(*tools.Catalog) error
}

// Apply runs every Register function on cat. A panic (tools.AddTool
// panics on a duplicate name) becomes an error.
func (e Extensions) Apply(cat *tools.Catalog) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("adding tools: %v", r)
		}
	}()
	for _, f := range e.Register {
		if err := f(cat); err != nil {
			return err
		}
	}
	return nil
}
