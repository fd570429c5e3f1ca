package tools_test

import (
	"context"
	"fmt"
	"log"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/tools"
)

// Example builds the default catalog, serves it on an in-memory transport
// and calls its PingME tool.
func Example() {
	ctx := context.Background()

	opts := tools.Options{} // the core toolset
	opts.Defaults()
	if err := opts.Validate(); err != nil {
		log.Fatal(err)
	}
	catalog, err := tools.New(opts, tools.Deps{})
	if err != nil {
		log.Fatal(err)
	}
	so := &sdk.ServerOptions{}
	catalog.Apply(so)
	server := sdk.NewServer(&sdk.Implementation{Name: "portcullis", Version: "dev"}, so)
	catalog.Register(server)

	st, ct := sdk.NewInMemoryTransports()
	if _, err := server.Connect(ctx, st, nil); err != nil {
		log.Fatal(err)
	}
	session, err := sdk.NewClient(&sdk.Implementation{Name: "client", Version: "dev"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()

	res, err := session.CallTool(ctx, &sdk.CallToolParams{Name: "PingME"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(catalog.ToolNames())
	fmt.Println(res.Content[0].(*sdk.TextContent).Text, res.IsError)
	// Output:
	// [PingME calculator echo time whoami]
	// BISMILLAH false
}
