package upstream

import (
	"bytes"
	"encoding/json"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/mcpapps"
)

// MCP Apps. An upstream's App resources (ui:// URIs) are served under
// its prefix (mcpapps.Served), so that two upstreams serving one App —
// two instances of a server — each show their own: in the tools' _meta
// (sync.go), the resource lists, what a read returns (resources.go), the
// resource links and embedded resources of a tool's result (here),
// subscriptions and their updates (subscriptions.go, proxy.go); a read
// or a subscription of the served URI reaches the upstream as its own
// URI. An upstream that serves no App pays nothing for it.

// servedMeta returns a tool's _meta with the App resource it names served
// under the upstream's prefix.
func (s *supervisor) servedMeta(meta sdk.Meta) sdk.Meta {
	return mcpapps.ServedMeta(s.prefix, meta)
}

// servesApps reports whether what an upstream lists serves MCP Apps: a
// tool that says anything of Apps, or an App resource.
func servesApps(set catalog.Set) bool {
	for _, t := range set.Tools {
		if mcpapps.HasUI(t.Tool.Meta) {
			return true
		}
	}
	for _, r := range set.Resources {
		if mcpapps.IsURI(r.Resource.URI) {
			return true
		}
	}
	for _, t := range set.Templates {
		if mcpapps.IsURI(t.Template.URITemplate) {
			return true
		}
	}
	return false
}

// servedResult returns a tool's result with the App resources its
// resource links and embedded resources name served under the prefix,
// for an upstream that serves Apps; res itself otherwise. A result
// passed on as it came (*catalog.RawToolResult) that names no ui:// URI
// stays so; one that does is decoded, and sent as decoded.
func (u *proxy) servedResult(res sdk.Result) sdk.Result {
	if u.prefix == "" || !u.sup.apps.Load() {
		return res
	}
	switch r := res.(type) {
	case *sdk.CallToolResult:
		u.servedContent(r.Content)
	case *catalog.RawToolResult:
		if !bytes.Contains(r.JSON, []byte(`"`+mcpapps.Scheme)) {
			return res
		}
		var c sdk.CallToolResult
		if err := json.Unmarshal(r.JSON, &c); err != nil {
			return res
		}
		u.servedContent(c.Content)
		return &c
	}
	return res
}

// servedContent serves the App resources content names under the
// prefix, in place.
func (u *proxy) servedContent(content []sdk.Content) {
	for _, c := range content {
		switch c := c.(type) {
		case *sdk.ResourceLink:
			c.URI = mcpapps.Served(u.prefix, c.URI)
		case *sdk.EmbeddedResource:
			if c.Resource != nil {
				c.Resource.URI = mcpapps.Served(u.prefix, c.Resource.URI)
			}
		}
	}
}
