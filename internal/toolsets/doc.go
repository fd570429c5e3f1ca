// Package toolsets holds the toolsets built into Portcullis, and the
// resources and prompts declared in its configuration.
//
// [Add] puts into a catalog what [Options] (the `tools:` section of the
// config) enables and declares, with [Deps] (an HTTP client, a clock, a
// logger); [New] does the same into a new catalog. They are the binary's
// demonstration and conformance tools, not part of the public API: a
// program built on Portcullis adds its own tools through the root package
// and package tools.
//
// # Toolsets
//
//   - core (the default): PingME, echo, calculator, time, whoami.
//   - workshop: weather (Open-Meteo), country_info, calculator.
//   - conformance: what the official MCP conformance suite calls. Off by
//     default; never enable it for real users.
//
// # Adding a tool
//
// A tool is an input struct, an output struct and a typed handler. Describe
// every field with a `jsonschema` tag: the SDK turns the structs into the
// input and output schemas and validates the arguments before the handler
// runs, so the handler never sees malformed input.
//
//	type greetInput struct {
//		Name string `json:"name" jsonschema:"Who to greet."`
//	}
//
//	type greetOutput struct {
//		Greeting string `json:"greeting" jsonschema:"The greeting."`
//	}
//
//	func greetTool() catalog.Tool {
//		return catalog.NewTool(&sdk.Tool{
//			Name:  "greet",
//			Title: "Greet someone",
//			Description: "Returns a greeting for the given name. Call this when " +
//				"the user asks to be greeted; not for other messages.",
//			InputSchema: schemaFor[greetInput](func(p map[string]*jsonschema.Schema) {
//				p["name"].MaxLength = ptr(100) // what tags cannot say: bounds, enums
//			}),
//			Annotations: readOnly("Greet someone", false),
//		}, func(ctx context.Context, req *sdk.CallToolRequest, in greetInput) (*sdk.CallToolResult, greetOutput, error) {
//			if in.Name == "" {
//				return nil, greetOutput{}, errors.New("name is empty; ask the user who to greet")
//			}
//			return nil, greetOutput{Greeting: "Hello, " + in.Name}, nil
//		})
//	}
//
// Then list it in a toolset function (coreTools, workshopTools) and add a
// case to its test table. (doc_test.go compiles and calls this very tool.)
//
// Write the Description for the model: what the tool does, when to call it
// and when not, and what it returns. Name tools in snake_case. Set the
// annotations truthfully: ReadOnlyHint for tools without side effects,
// OpenWorldHint for tools that reach an outside service.
//
// A handler that fails returns an error whose text the model reads (the SDK
// turns it into a result with IsError set): say what went wrong and what to
// do, "no place named \"Atlantis\" was found; check the spelling", never a
// bare "error" and never internal detail. Returning a [jsonrpc.Error] makes
// a protocol error instead; that is for the caller's protocol mistakes, not
// for the tool's failures. Handlers must not panic.
//
// Tools reach upstream services only through [Deps.HTTPClient] and never
// forward the caller's credentials. Observability (metrics, traces, audit
// logs) is middleware around the server, not code in this package.
//
// [jsonrpc.Error]: https://pkg.go.dev/github.com/modelcontextprotocol/go-sdk/jsonrpc#Error
package toolsets
