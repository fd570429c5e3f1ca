package mcp

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/portcullis-mcp/portcullis/internal/jsonrpcerr"
	segjson "github.com/segmentio/encoding/json"
)

// envelope is the part of a JSON-RPC message the router reads. Decoded by
// [decode], its fields point into the request body.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

type parseError struct {
	id   json.RawMessage
	code int64
	msg  string
}

// decodeFlags decode JSON as the SDK does (field names match exactly, so
// that the router and the SDK read the same method and tool name from a
// body), and without copying: strings and raw values point into the input,
// which the router keeps unchanged for the SDK.
const decodeFlags = segjson.DontMatchCaseInsensitiveStructFields | segjson.ZeroCopy

// decode decodes the JSON value data into v, which then points into data.
// Bytes after the value are a syntax error.
func decode(data []byte, v any) error {
	rest, err := segjson.Parse(data, v, decodeFlags)
	if err == nil && len(rest) > 0 {
		err = &segjson.SyntaxError{}
	}
	return err
}

// parseMessages decodes a message or a batch far enough to route and check
// it, in one pass over the body: -32700 for a body that is not JSON, -32600
// for JSON that is not a JSON-RPC 2.0 request, notification or response.
func parseMessages(body []byte) ([]envelope, *parseError) {
	if tooDeep(body, maxDepth) {
		return nil, &parseError{code: jsonrpcerr.ParseError, msg: fmt.Sprintf("Parse error: the request body nests arrays and objects more than %d levels deep.", maxDepth)}
	}
	msgs, err := decodeMessages(body)
	if err != nil {
		var syntax *segjson.SyntaxError
		switch {
		case errors.As(err, &syntax) || !segjson.Valid(body):
			// A type error can come first in the body; the body is still
			// not JSON if it is invalid further on.
			return nil, &parseError{code: jsonrpcerr.ParseError, msg: "Parse error: the request body is not valid JSON."}
		case msgs == nil:
			return nil, &parseError{code: jsonrpcerr.InvalidRequest, msg: "Invalid Request: a batch must be a non-empty array of JSON-RPC messages."}
		default:
			return nil, &parseError{code: jsonrpcerr.InvalidRequest, msg: "Invalid Request: the body must be a JSON-RPC 2.0 message object."}
		}
	}
	for _, m := range msgs {
		switch {
		case m.JSONRPC != "2.0":
			return nil, &parseError{id: m.ID, code: jsonrpcerr.InvalidRequest, msg: `Invalid Request: "jsonrpc" must be "2.0".`}
		case m.Method == "" && len(m.ID) > 0 && (len(m.Result) > 0 || len(m.Error) > 0):
			// A response to a server→client request.
		case m.Method == "":
			return nil, &parseError{id: m.ID, code: jsonrpcerr.InvalidRequest, msg: `Invalid Request: a request needs a "method".`}
		}
	}
	return msgs, nil
}

// maxDepth is how deeply a body may nest arrays and objects, as the SDK
// allows. The decoder recurses once per level without a limit of its own,
// so a deeper body (a 4 MiB one can nest two million levels) is refused
// before it is decoded, instead of overflowing the stack.
const maxDepth = 1000

// tooDeep reports whether the JSON text data nests arrays and objects more
// than max levels deep. It looks at bytes only, skipping strings; data
// need not be valid JSON.
func tooDeep(data []byte, max int) bool {
	depth := 0
	inString, escaped := false, false
	for _, c := range data {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > max {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}

// isBatch reports whether body is a JSON array: a batch of messages.
func isBatch(body []byte) bool {
	trimmed := bytes.TrimSpace(body)
	return len(trimmed) > 0 && trimmed[0] == '['
}

// decodeMessages decodes body as one message or a batch. On an error, msgs
// is nil for a batch and not nil for a single message.
func decodeMessages(body []byte) (msgs []envelope, err error) {
	if isBatch(body) {
		var batch []envelope
		if err := decode(body, &batch); err != nil || len(batch) == 0 {
			return nil, cmp.Or(err, errEmptyBatch)
		}
		return batch, nil
	}
	msgs = make([]envelope, 1)
	return msgs, decode(body, &msgs[0])
}

var errEmptyBatch = errors.New("empty batch")

// idText is a JSON-RPC id as text: a string id unquoted, a number as
// written. A string with control characters stays quoted.
func idText(id json.RawMessage) string {
	if len(id) == 0 || id[0] != '"' {
		return string(id)
	}
	var s string
	if segjson.Unmarshal(id, &s) == nil && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return s
	}
	return string(id)
}

// onlyInitialized reports whether msgs are the initialized notification
// alone.
func onlyInitialized(msgs []envelope) bool {
	return len(msgs) == 1 && msgs[0].Method == "notifications/initialized" && len(msgs[0].ID) == 0
}

// allAnswers reports whether msgs are all answers to server→client
// requests.
func allAnswers(msgs []envelope) bool {
	for _, m := range msgs {
		if m.Method != "" {
			return false
		}
	}
	return len(msgs) > 0
}

func isInitialize(msgs []envelope) bool {
	for _, m := range msgs {
		if m.Method == "initialize" {
			return true
		}
	}
	return false
}
