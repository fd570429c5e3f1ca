package doctor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
)

// response is an HTTP response with its body read (bounded).
type response struct {
	status int
	header http.Header
	body   []byte
}

const maxBody = 1 << 20

func (r *response) mediaType() string {
	mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type"))
	return mt
}

// describe summarises the response for a failure line.
func (r *response) describe() string {
	s := fmt.Sprintf("%d %s", r.status, http.StatusText(r.status))
	if loc := r.header.Get("Location"); loc != "" {
		return s + " redirecting to " + loc
	}
	if mt := r.mediaType(); mt != "" {
		s += " (" + mt + ")"
	}
	if e := r.rpcError(); e != "" {
		return s + e
	}
	if snippet := strings.Join(strings.Fields(string(r.body)), " "); snippet != "" {
		if len(snippet) > 80 {
			snippet = snippet[:80] + "…"
		}
		s += ": " + snippet
	}
	return s
}

func (r *response) decodeJSON(v any) error {
	if r.status != http.StatusOK {
		return fmt.Errorf("got %s, want 200 with JSON", r.describe())
	}
	if mt := r.mediaType(); mt != "application/json" {
		return fmt.Errorf("Content-Type is %q, want application/json", mt)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	return nil
}

// rpcMessage returns the last JSON-RPC message of a JSON or SSE body.
func (r *response) rpcMessage() (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	switch r.mediaType() {
	case "application/json":
		if err := json.Unmarshal(r.body, &m); err != nil {
			return nil, fmt.Errorf("the body is not a JSON-RPC message: %v", err)
		}
	case "text/event-stream":
		sc := bufio.NewScanner(bytes.NewReader(r.body))
		sc.Buffer(nil, maxBody)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				var mm map[string]json.RawMessage
				if json.Unmarshal([]byte(strings.TrimSpace(data)), &mm) == nil {
					m = mm
				}
			}
		}
		if m == nil {
			return nil, errors.New("the event stream carries no JSON-RPC message")
		}
	default:
		return nil, fmt.Errorf("Content-Type is %q, want application/json or text/event-stream", r.mediaType())
	}
	return m, nil
}

// rpcResult returns the result of a JSON-RPC response, which must hold
// field.
func (r *response) rpcResult(field string) (map[string]json.RawMessage, error) {
	m, err := r.rpcMessage()
	if err != nil {
		return nil, err
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(m["result"], &res) != nil || res[field] == nil {
		return nil, fmt.Errorf("the response has no result.%s", field)
	}
	return res, nil
}

// rpcError returns ` (JSON-RPC error CODE: MESSAGE)` when the body is a
// JSON-RPC error, else "".
func (r *response) rpcError() string {
	m, err := r.rpcMessage()
	if err != nil {
		return ""
	}
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(m["error"], &e) != nil || e.Code == 0 {
		return ""
	}
	return fmt.Sprintf(" (JSON-RPC error %d: %s)", e.Code, e.Message)
}
