package portcullis_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis"
)

// GreetIn is the greet tool's input. The SDK derives the input schema from
// it and validates arguments before the handler runs.
type GreetIn struct {
	Name string `json:"name" jsonschema:"Who to greet."`
}

// GreetOut is the greet tool's structured output.
type GreetOut struct {
	Greeting string `json:"greeting" jsonschema:"The greeting."`
}

// greet greets in.Name, or the verified caller when no name is given.
func greet(ctx context.Context, req *mcp.CallToolRequest, in GreetIn) (*mcp.CallToolResult, GreetOut, error) {
	who := in.Name
	if who == "" {
		p, ok := portcullis.Caller(req)
		if !ok {
			return nil, GreetOut{}, errors.New("no name was given and the caller is anonymous; ask the user for a name")
		}
		who = p.Subject
	}
	return nil, GreetOut{Greeting: "Hello, " + who}, nil
}

var greetTool = &mcp.Tool{
	Name:        "greet",
	Description: "Greets someone by name; without a name, greets the signed-in user.",
}

// A team's server is the portcullis binary plus its tools. This one serves
// MCP on in-memory streams, as `portcullis stdio` does on stdin and
// stdout, and calls its tool once. A real main is one call:
//
//	func main() {
//		portcullis.Main(portcullis.Tool(greetTool, greet))
//	}
func Example() {
	in, toServer := io.Pipe()
	fromServer, out := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- portcullis.Run(context.Background(), []string{"stdio"},
			portcullis.Tool(greetTool, greet),
			portcullis.Environ(nil),          // no PORTCULLIS_* variables
			portcullis.Streams(in, out, nil), // logs discarded
		)
		out.Close()
	}()

	responses := bufio.NewScanner(fromServer)
	send := func(msg string) { fmt.Fprintln(toServer, msg) }
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"example","version":"1"}}}`)
	responses.Scan()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}`)
	responses.Scan()
	var res struct {
		Result struct {
			StructuredContent GreetOut `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(responses.Bytes(), &res); err != nil {
		fmt.Println(err)
	}
	fmt.Println(res.Result.StructuredContent.Greeting)

	toServer.Close() // end of input: stdio returns
	fmt.Println("exit code", portcullis.ExitCode(<-done))
	// Output:
	// Hello, Ada
	// exit code 0
}

// Run takes the binary's command lines. check-config validates the
// configuration (a file given with --config, and PORTCULLIS_* variables)
// and reports every problem at once.
func ExampleRun() {
	err := portcullis.Run(context.Background(), []string{"check-config"},
		portcullis.Environ([]string{"PORTCULLIS_LOG_LEVEL=loud", "PORTCULLIS_SERVER_LISTEN=nowhere"}),
		portcullis.Streams(nil, os.Stdout, nil),
	)
	fmt.Println(err)
	fmt.Println("exit code", portcullis.ExitCode(err))
	// Output:
	// portcullis check-config: 2 problems:
	//   - server.listen: "nowhere" is not host:port: address nowhere: missing port in address
	//   - log.level: "loud": want debug, info, warn or error
	// exit code 1
}

// Caller reads the verified identity in a handler. Without auth (stdio, or
// a loopback listener with no issuer) there is none.
func ExampleCaller() {
	whoami := func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, GreetOut, error) {
		p, ok := portcullis.Caller(req)
		if !ok {
			return nil, GreetOut{}, errors.New("this server runs without authentication, so there is no user to name")
		}
		if !p.HasScopes("greet:self") {
			return nil, GreetOut{}, errors.New("the token lacks the greet:self scope; sign in again and grant it")
		}
		return nil, GreetOut{Greeting: "You are " + p.Subject + ", signed in through " + p.Issuer}, nil
	}
	_ = portcullis.Tool(&mcp.Tool{Name: "whoami_greeting", Description: "Names the signed-in user."}, whoami)
}

// Toolset hands out a team's tools as one value, which a main adds with
// the rest.
func ExampleToolset() {
	greetings := portcullis.Toolset("greetings",
		portcullis.Tool(greetTool, greet),
		portcullis.Prompt(&mcp.Prompt{Name: "greet_everyone", Description: "Greet every person named in the text."},
			func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{
					Role:    "user",
					Content: &mcp.TextContent{Text: "Call greet once for every person named in the text that follows."},
				}}}, nil
			}),
	)
	_ = greetings // portcullis.Main(greetings)
}

// DeployIn is the deploy tool's input.
type DeployIn struct {
	Service string `json:"service" jsonschema:"The service to roll out."`
	Version string `json:"version" jsonschema:"The version to roll out."`
}

// A rollout takes minutes: as a task tool, a client that supports the
// tasks extension gets a task handle at once and polls tasks/get for the
// result, over any replica when tasks.store is redis. The handler's
// context ends if the client cancels (tasks/cancel). Before going ahead it
// asks the user to confirm, during the task: tasks/get shows the question,
// tasks/update answers it, and the handler runs again with the answer.
func ExampleTaskTool() {
	rollout := func(ctx context.Context, req *mcp.CallToolRequest, in DeployIn) (*mcp.CallToolResult, any, error) {
		answer, _ := req.Params.InputResponses["confirm"].(*mcp.ElicitResult)
		if answer == nil {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
				"confirm": &mcp.ElicitParams{Message: "Roll " + in.Service + " out to " + in.Version + "?"},
			}}, nil, nil
		}
		if answer.Action != "accept" {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Rollout declined; nothing changed."}}}, nil, nil
		}
		select { // the rollout itself
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("rollout of %s stopped: %w", in.Service, context.Cause(ctx))
		case <-time.After(10 * time.Minute):
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Service + " now runs " + in.Version + "."}}}, nil, nil
	}
	_ = portcullis.TaskTool(&mcp.Tool{Name: "deploy", Description: "Rolls a service out to a version."}, rollout, portcullis.TaskOptional)
}
