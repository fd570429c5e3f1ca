package portcullis

import (
	"errors"
	"fmt"
	"slices"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/curation"
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
	// servers are the tools the program adds to named virtual servers
	// (see ServerTools), filled as Register runs; nil when it adds none.
	servers *serverTools
}

// serverTools is what ServerTools adds: the names of the tools for each
// virtual server, in the order added.
type serverTools struct {
	names map[string][]string // by server name
	order []string            // the servers, first added first
}

func (st *serverTools) add(server, tool string) {
	if _, ok := st.names[server]; !ok {
		st.order = append(st.order, server)
	}
	st.names[server] = append(st.names[server], tool)
}

// addServerTools adds to each of the virtual servers the tools the
// program added for it, as selections of source "program"; a server the
// list does not have is an error.
func (e extensions) addServerTools(servers []virtualServer) error {
	if e.servers == nil {
		return nil
	}
	var problems []error
	for _, name := range e.servers.order {
		i := slices.IndexFunc(servers, func(s virtualServer) bool { return s.Name == name })
		if i < 0 {
			problems = append(problems, fmt.Errorf("portcullis.ServerTools: no virtual server named %q in servers", name))
			continue
		}
		for _, tool := range e.servers.names[name] {
			servers[i].Tools = append(servers[i].Tools, curation.ToolSelection{Source: curation.SourceProgram, Name: tool})
		}
	}
	return errors.Join(problems...)
}

// Apply runs every Register function on cat, seen as the tools.Catalog
// programs know. A panic (tools.AddTool panics on a duplicate name)
// becomes an error.
func (e extensions) Apply(cat *catalog.Catalog) error {
	return e.apply((*tools.Catalog)(cat.Public()))
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
