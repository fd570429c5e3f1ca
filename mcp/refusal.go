package mcp

import "net/http"

// errorRecorder is implemented by a response writer that wants to know
// when the handler answers a request itself, before the SDK sees it, with a
// JSON-RPC error (observability.Refusals wraps /mcp in one): such a request
// reaches no SDK middleware, so telemetry learns of it here.
type errorRecorder interface {
	RecordJSONRPCError(code int)
}

// recordRefusal tells w's recorder, if it has one, the code of a JSON-RPC
// error the handler writes itself.
func recordRefusal(w http.ResponseWriter, code int) {
	if rec, ok := w.(errorRecorder); ok {
		rec.RecordJSONRPCError(code)
	}
}
