// Package jsonrpcerr writes the JSON-RPC 2.0 error responses that
// Portcullis answers itself, before the SDK sees a message: limits, the
// /mcp pre-parser, the tool gate and the stdio line reader all use it, so
// that every such answer has one shape.
package jsonrpcerr

import (
	"encoding/json"
	"net/http"
)

// Error codes of JSON-RPC 2.0 that Portcullis answers with.
const (
	ParseError     = -32700
	InvalidRequest = -32600
	MethodNotFound = -32601
	// ServerError is the implementation-defined server error, used for
	// refusals (limits, timeouts).
	ServerError = -32000
)

// Line returns the error response for id (nil or empty means null) as one
// line of JSON ending in a newline.
func Line(id json.RawMessage, code int64, message string) []byte {
	return LineData(id, code, message, nil)
}

// LineData is [Line] with the error's data member (omitted when nil).
func LineData(id json.RawMessage, code int64, message string, data json.RawMessage) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	type wireError struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	}
	data, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}{"2.0", id, wireError{code, message, data}})
	if err != nil {
		// Only an id or data that is not valid JSON fails; answer without.
		return Line(nil, code, message)
	}
	return append(data, '\n')
}

// Recorder is implemented by a response writer that wants to know when a
// request is answered with a JSON-RPC error before the SDK sees it: such a
// request reaches no SDK middleware, so telemetry (observability.Refusals)
// learns of it here.
type Recorder interface {
	RecordJSONRPCError(code int)
}

// AnswerRecorder is implemented by a response writer that wants to know
// when a request is answered successfully before the SDK sees it (the
// tasks extension's methods), for telemetry. link is the W3C traceparent
// of a related trace (the call that created the task), or "".
type AnswerRecorder interface {
	RecordAnswered(link string)
}

// Write writes status and the error response for id (nil or empty means
// null) as an application/json body, and tells w's [Recorder], if it has
// one, the code. Headers set on w before the call are sent too.
func Write(w http.ResponseWriter, status int, id json.RawMessage, code int64, message string) {
	WriteData(w, status, id, code, message, nil)
}

// WriteData is [Write] with the error's data member (omitted when nil).
func WriteData(w http.ResponseWriter, status int, id json.RawMessage, code int64, message string, data json.RawMessage) {
	if rec, ok := w.(Recorder); ok {
		rec.RecordJSONRPCError(int(code))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(LineData(id, code, message, data))
}
