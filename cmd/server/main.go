// Command portcullis serves MCP tools, resources and prompts over Streamable
// HTTP or stdio. Run "portcullis help" for its subcommands.
//
// It is the module's public API with nothing added: see
// github.com/portcullis-mcp/portcullis.
package main

import "github.com/portcullis-mcp/portcullis"

func main() {
	portcullis.Main()
}
