package portcullis_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis"
)

// TestRunRefusesATakenName adds a tool named as a core tool: the server
// does not start, and the error names the tool and its toolset.
func TestRunRefusesATakenName(t *testing.T) {
	tests := []struct {
		name string
		opt  portcullis.Option
		want []string
	}{
		{name: "tool", opt: portcullis.Tool(&mcp.Tool{Name: "echo"}, greet), want: []string{`"echo"`}},
		{name: "in a toolset", opt: portcullis.Toolset("team", portcullis.Tool(&mcp.Tool{Name: "echo"}, greet)), want: []string{"toolset team", `"echo"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := portcullis.Run(context.Background(), []string{"stdio"}, tt.opt,
				portcullis.Environ(nil), portcullis.Streams(nil, nil, nil))
			if err == nil {
				t.Fatal("Run succeeded with a tool named echo, which the core toolset has")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
			if got := portcullis.ExitCode(err); got != 1 {
				t.Errorf("ExitCode = %d, want 1", got)
			}
		})
	}
}

// TestRunUsage: unknown commands and flags are usage errors (exit 2),
// help is success.
func TestRunUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
	}{
		{name: "unknown command", args: []string{"serv"}, want: 2},
		{name: "unknown flag", args: []string{"serve", "--nope"}, want: 2},
		{name: "help", args: []string{"help"}, want: 0},
		{name: "flag help", args: []string{"serve", "-h"}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := portcullis.Run(context.Background(), tt.args, portcullis.Environ(nil), portcullis.Streams(nil, nil, nil))
			if got := portcullis.ExitCode(err); got != tt.want {
				t.Errorf("ExitCode(%v) = %d, want %d", err, got, tt.want)
			}
		})
	}
}

func TestCallerWithoutAuth(t *testing.T) {
	if _, ok := portcullis.Caller(&mcp.CallToolRequest{}); ok {
		t.Error("Caller reported a principal for a request without token info")
	}
	if _, ok := portcullis.Caller(nil); ok {
		t.Error("Caller reported a principal for nil")
	}
}
