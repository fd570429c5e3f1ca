package observability

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/portcullis-mcp/portcullis/internal/mcpmethod"
)

// Attribute keys of the OpenTelemetry MCP and GenAI semantic conventions
// that the semconv package does not define yet.
const (
	attrMCPMethodName      = attribute.Key("mcp.method.name")
	attrMCPProtocolVersion = attribute.Key("mcp.protocol.version")
	attrMCPSessionID       = attribute.Key("mcp.session.id")
	attrMCPResourceURI     = attribute.Key("mcp.resource.uri")
	attrGenAIToolName      = attribute.Key("gen_ai.tool.name")
	attrGenAIOperationName = attribute.Key("gen_ai.operation.name")
	attrGenAIPromptName    = attribute.Key("gen_ai.prompt.name")
	attrRPCResponseStatus  = attribute.Key("rpc.response.status_code")
	// Portcullis's own: the virtual server, and a curated tool's name on
	// the root server.
	attrServer       = attribute.Key("portcullis.server")
	attrToolOriginal = attribute.Key("portcullis.tool.original")
	// The name a tools/call used when it is not the tool's listed name
	// (an MCP App's call by its upstream's name).
	attrToolCalledAs = attribute.Key("portcullis.tool.called_as")
)

// MethodLabel is the mcp_method_name of method: itself when it is an MCP
// method, [Other] otherwise.
func MethodLabel(method string) string {
	if mcpmethod.IsRequest(method) || mcpmethod.IsNotification(method) || mcpmethod.IsTaskRequest(method) {
		return method
	}
	return Other
}

// Other is the value a label takes when the real value is not one the
// server knows (an unregistered tool, an unknown method): a caller cannot
// create series by sending new names. It is the OpenTelemetry convention's
// spelling.
const Other = "_OTHER"
