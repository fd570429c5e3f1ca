// Command hello-tools is a team's MCP tool server built on Portcullis: one
// typed tool, served with everything the portcullis binary has (OIDC auth,
// per-tool policy, limits, both protocol eras, stdio, metrics, traces,
// health). It takes the binary's commands, flags and configuration:
//
//	go run . serve --dev
package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis"
)

// HelloIn is the hello tool's input; the SDK validates it before the
// handler runs.
type HelloIn struct {
	Name     string `json:"name,omitempty" jsonschema:"Who to greet. Leave it out to greet the signed-in user."`
	Language string `json:"language,omitempty" jsonschema:"en (the default), fr or de."`
}

// HelloOut is the hello tool's structured result.
type HelloOut struct {
	Greeting string `json:"greeting" jsonschema:"The greeting."`
	Caller   string `json:"caller,omitempty" jsonschema:"The verified subject of the caller's token, when there is one."`
}

var greetings = map[string]string{"en": "Hello", "fr": "Bonjour", "de": "Hallo"}

func hello(ctx context.Context, req *mcp.CallToolRequest, in HelloIn) (*mcp.CallToolResult, HelloOut, error) {
	var out HelloOut
	if p, ok := portcullis.Caller(req); ok {
		out.Caller = p.Subject
	}
	who := in.Name
	if who == "" {
		who = out.Caller
	}
	if who == "" {
		return nil, out, fmt.Errorf("no name was given and the call carries no signed-in user; pass name")
	}
	lang := strings.ToLower(in.Language)
	if lang == "" {
		lang = "en"
	}
	word, ok := greetings[lang]
	if !ok {
		return nil, out, fmt.Errorf("language %q is not one this tool speaks; use en, fr or de", in.Language)
	}
	out.Greeting = word + ", " + who + "!"
	return nil, out, nil
}

func main() {
	portcullis.Main(
		portcullis.Tool(&mcp.Tool{
			Name:        "hello",
			Title:       "Say hello",
			Description: "Greets someone by name, or the signed-in user when no name is given, in English, French or German.",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		}, hello),
	)
}
