// Package tools is where a program built on Portcullis adds its own tools,
// resources and prompts: the [Catalog] of everything the server offers.
//
// Most programs never name it: the root package's Tool, TaskTool,
// Resource and Prompt options add to the catalog. Code that builds tools
// at start (from a file or a service description) gets the catalog itself
// through the root package's Catalog option and adds to it with [AddTool]
// and [AddTaskTool]:
//
//	portcullis.Main(portcullis.Catalog(func(c *tools.Catalog) error {
//		for _, op := range operations {
//			tools.AddTool(c, op.Tool(), op.Handle)
//		}
//		return nil
//	}))
//
// A tool is an input struct, an output struct and a typed handler. Describe
// every field with a `jsonschema` tag: the SDK turns the structs into the
// input and output schemas and validates the arguments before the handler
// runs, so the handler never sees malformed input. Write the Description
// for the model: what the tool does, when to call it and when not, and what
// it returns; set the annotations truthfully (ReadOnlyHint for tools
// without side effects, OpenWorldHint for tools that reach an outside
// service).
//
// A handler that fails returns an error whose text the model reads (the SDK
// turns it into a result with IsError set): say what went wrong and what to
// do, "no place named \"Atlantis\" was found; check the spelling", never a
// bare "error" and never internal detail. Returning a [jsonrpc.Error] makes
// a protocol error instead; that is for the caller's protocol mistakes, not
// for the tool's failures. Handlers must not panic.
//
// Observability (metrics, traces, audit logs), auth and per-tool policy are
// applied around every tool of the catalog by the server; tools need none
// of it.
//
// [jsonrpc.Error]: https://pkg.go.dev/github.com/modelcontextprotocol/go-sdk/jsonrpc#Error
package tools
