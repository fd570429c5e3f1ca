// Package mcpheader names the HTTP headers of MCP's Streamable HTTP
// transport, in one place for the router and for CORS.
package mcpheader

// Header names, as the transport spells them (HTTP header names are
// case-insensitive).
const (
	ProtocolVersion = "Mcp-Protocol-Version"
	SessionID       = "Mcp-Session-Id"
	LastEventID     = "Last-Event-ID"
	// Method and Name carry a 2026-07-28 request's method and the tool,
	// prompt or resource it names.
	Method = "Mcp-Method"
	Name   = "Mcp-Name"
	// ParamPrefix starts the headers that carry a 2026-07-28 tool call's
	// arguments marked x-mcp-header in the tool's input schema: one header
	// per such argument, named by the tool.
	ParamPrefix = "Mcp-Param-"
)

// Request lists the request headers, besides the Mcp-Param-* ones, that a
// browser client of the transport may send and that are not
// CORS-safelisted: the bearer token, the JSON content type, the protocol
// headers, and W3C trace context.
var Request = []string{
	"Authorization", "Content-Type",
	ProtocolVersion, SessionID, LastEventID, Method, Name,
	"Traceparent", "Tracestate", "Baggage",
}

// Response lists the response headers a browser client must be able to
// read: the session id, the negotiated version, the protocol headers, the
// Bearer challenge and when to retry.
var Response = []string{
	SessionID, ProtocolVersion, Method, Name,
	"WWW-Authenticate", "Retry-After",
}
