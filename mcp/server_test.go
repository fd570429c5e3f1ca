package mcp

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// connect serves server over in-memory transports and returns a client
// session.
func connect(t *testing.T, server *sdk.Server) *sdk.ClientSession {
	t.Helper()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := server.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestPanickingToolIsAnErrorResult(t *testing.T) {
	var logs strings.Builder
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	server := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	sdk.AddTool(server, &sdk.Tool{Name: "boom"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		panic("kaboom")
	})
	server.AddPrompt(&sdk.Prompt{Name: "bad"}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		panic("prompt kaboom")
	})
	server.AddReceivingMiddleware(recoverMiddleware(logger))
	cs := connect(t, server)

	for range 2 { // the process, and the session, live on
		res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "boom"})
		if err != nil {
			t.Fatalf("CallTool: %v", err)
		}
		text := res.Content[0].(*sdk.TextContent).Text
		if !res.IsError || !strings.Contains(text, `"boom" failed`) || strings.Contains(text, "kaboom") {
			t.Fatalf("result = %+v %q; want an error result that does not leak the panic", res, text)
		}
	}
	_, err := cs.GetPrompt(t.Context(), &sdk.GetPromptParams{Name: "bad"})
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) || jerr.Code != jsonrpc.CodeInternalError || strings.Contains(err.Error(), "kaboom") {
		t.Fatalf("GetPrompt error = %v; want an internal error that does not leak the panic", err)
	}
	if !strings.Contains(logs.String(), "kaboom") || !strings.Contains(logs.String(), "stack") {
		t.Errorf("panic not logged with its stack:\n%s", logs.String())
	}
}

func TestUnknownToolMessage(t *testing.T) {
	known := []string{"PingME", "calculator", "echo", "get_weather", "time"}
	tests := []struct {
		name, tool, want string
	}{
		{name: "typo", tool: "gett_weather", want: `Unknown tool: "gett_weather". Did you mean "get_weather"?`},
		{name: "case", tool: "pingme", want: `Did you mean "PingME"?`},
		{name: "nothing close lists tools", tool: "launch_rockets", want: "Available tools: PingME, calculator, echo, get_weather, time."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unknownToolMessage(tt.tool, known); !strings.Contains(got, tt.want) {
				t.Fatalf("unknownToolMessage(%q) = %q, want containing %q", tt.tool, got, tt.want)
			}
		})
	}
}
