package doctor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// JSON-RPC bodies the checks send.
const (
	initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"portcullis-doctor","version":"1"}}}`
	pingBody       = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	modernVersion  = "2026-07-28"
	modernList     = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"portcullis-doctor","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
)

// response is an HTTP response with its body read (bounded).
type response struct {
	status int
	header http.Header
	body   []byte
}

const maxBody = 1 << 20

func (d *doctor) do(req *http.Request) (*response, error) {
	resp, err := d.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is already in the detail
		}
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("reading the response: %w", err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

func (d *doctor) get(ctx context.Context, u string) (*response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	return d.do(req)
}

// post sends body to the endpoint as a Streamable HTTP client does, with
// the token when withToken is set and one was given.
func (d *doctor) post(ctx context.Context, body string, withToken bool, header map[string]string) (*response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.opts.URL, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if withToken && d.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+d.opts.Token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return d.do(req)
}

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
