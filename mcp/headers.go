package mcp

import (
	"net/http"

	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
)

// RequestIDHeader is the request header in which the handler passes the
// JSON-RPC id of a single-request POST on to the SDK's middleware (which
// cannot otherwise see it), for telemetry. Any value a client sends under
// this name is removed first.
const RequestIDHeader = "Portcullis-Jsonrpc-Request-Id"

// headerToolName returns the tool a tools/call names in its Mcp-Name
// header when the request is of revision 2026-07-28 or later, else "".
// The SDK checks the header against the body, and the registered tool's
// parameter headers against the request, before any middleware runs: so a
// name in the header that the caller does not see is answered before the
// SDK sees it.
func headerToolName(header http.Header) string {
	if header.Get(mcpheader.Method) != "tools/call" || header.Get(mcpheader.ProtocolVersion) < statelessEra {
		return ""
	}
	return header.Get(mcpheader.Name)
}
