// Package mcpmethod names the MCP methods a client sends to a server, in
// every protocol revision Portcullis serves: the router answers others
// with -32601, and telemetry labels others "_OTHER".
package mcpmethod

// requests are the request methods the SDK's server answers.
var requests = map[string]bool{
	"initialize": true, "ping": true, "server/discover": true,
	"tools/list": true, "tools/call": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true, "subscriptions/listen": true,
	"prompts/list": true, "prompts/get": true,
	"completion/complete": true, "logging/setLevel": true,
}

// notifications are the notifications a client sends to a server.
var notifications = map[string]bool{
	"notifications/initialized": true, "notifications/cancelled": true,
	"notifications/progress": true, "notifications/roots/list_changed": true,
	"notifications/elicitation/complete": true,
}

// IsRequest reports whether method is a request a server answers.
func IsRequest(method string) bool { return requests[method] }

// IsNotification reports whether method is a notification a client sends
// to a server.
func IsNotification(method string) bool { return notifications[method] }

// taskRequests are the requests of the tasks extension
// (io.modelcontextprotocol/tasks) of revision 2026-07-28, which Portcullis
// answers itself.
var taskRequests = map[string]bool{"tasks/get": true, "tasks/update": true, "tasks/cancel": true}

// IsTaskRequest reports whether method is a request of the tasks extension.
func IsTaskRequest(method string) bool { return taskRequests[method] }
