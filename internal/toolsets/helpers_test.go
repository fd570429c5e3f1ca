package toolsets

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/internal/catalog"
)

// newCatalog builds a catalog from opts or fails the test.
func newCatalog(t *testing.T, opts Options, deps Deps) *catalog.Catalog {
	t.Helper()
	c, err := New(opts, deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// connect serves c on an in-memory transport and returns a connected client
// session, on the latest protocol version, and the server. copts may be nil.
func connect(t *testing.T, c *catalog.Catalog, copts *sdk.ClientOptions) (*sdk.ClientSession, *sdk.Server) {
	t.Helper()
	return connectClient(t, c, sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "v0"}, copts), "")
}

// connectClient is connect with the given client, on the given protocol
// version ("" for the latest).
func connectClient(t *testing.T, c *catalog.Catalog, client *sdk.Client, version string) (*sdk.ClientSession, *sdk.Server) {
	t.Helper()
	ctx := t.Context()
	so := &sdk.ServerOptions{}
	c.Apply(so)
	s := sdk.NewServer(&sdk.Implementation{Name: "portcullis-test", Version: "v0"}, so)
	c.Register(s)
	st, ct := sdk.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := client.Connect(ctx, ct, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, s
}

// listedTool returns the tool named name from tools/list, or fails the
// test.
func listedTool(t *testing.T, cs *sdk.ClientSession, name string) *sdk.Tool {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("%s not listed", name)
	return nil
}

// call calls a tool and fails the test on a protocol error.
func call(t *testing.T, cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s): protocol error: %v", name, err)
	}
	return res
}

// resultText joins the text blocks of res.
func resultText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// structured decodes res.StructuredContent into a map.
func structured(t *testing.T, res *sdk.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatalf("marshal structured content: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return m
}
