package upstream_test

import (
	"context"
	"log/slog"
	"os"

	"github.com/portcullis-mcp/portcullis/internal/toolsets"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// A stdio MCP server whose tools are served as files_<name>, behind the
// catalog's other tools.
func ExampleNew() {
	catalog, err := toolsets.New(toolsets.Options{}, toolsets.Deps{})
	if err != nil {
		panic(err)
	}
	m, err := upstream.New([]upstream.Options{{
		Name:      "files",
		Transport: upstream.TransportStdio,
		Command:   "npx",
		Args:      []string{"-y", "@modelcontextprotocol/server-filesystem@2026.8.31", "/srv/shared"},
		Required:  true,
	}}, catalog, upstream.Deps{Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		panic(err)
	}
	m.Start(context.Background())
	defer m.Close()
	// Build servers from catalog (mcp.New) and serve them; the
	// upstream's tools appear in them as it connects.
}
