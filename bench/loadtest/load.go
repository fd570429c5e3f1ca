package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The two protocol paths the harness drives.
const (
	// pathModern is protocol 2026-07-28: no handshake, every request
	// carries its protocol version, client info and capabilities in
	// params._meta, and the Mcp-Method / Mcp-Name headers.
	pathModern = "2026-07-28"
	// pathLegacy is protocol 2025-11-25 with a session: each worker
	// initializes once, then sends its calls with Mcp-Session-Id.
	pathLegacy = "2025-11-25"
)

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"loadtest","version":"1"},` +
	`"io.modelcontextprotocol/clientCapabilities":{}}`

// worker is one keep-alive client connection's worth of load: it sends
// tools/call echo requests one after another and checks every answer.
type worker struct {
	idx     int
	client  *http.Client
	url     string // the /mcp endpoint
	auth    string // Authorization header value
	path    string
	version string // Mcp-Protocol-Version on the modern path; empty means pathModern
	tool    string // the echo tool's name on this server; empty means echo
	session string // Mcp-Session-Id, legacy path only (empty if the server keeps none)
	next    int64
	body    []byte
}

func newHTTPClient(conc int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        conc + 8,
			MaxIdleConnsPerHost: conc + 8,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}
}

// post sends body with the worker's headers plus extra, and returns the
// response status, headers and body.
func (w *worker) post(ctx context.Context, body []byte, extra ...string) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	h := req.Header
	h["Content-Type"] = []string{"application/json"}
	h["Accept"] = []string{"application/json, text/event-stream"}
	if w.auth != "" {
		h["Authorization"] = []string{w.auth}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = []string{extra[i+1]}
	}
	return do(w.client, req)
}

func do(c *http.Client, req *http.Request) (int, http.Header, []byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// setup initializes a legacy session; on the modern path it does nothing.
func (w *worker) setup(ctx context.Context) error {
	if w.path != pathLegacy {
		return nil
	}
	body := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},` +
		`"clientInfo":{"name":"loadtest","version":"1"}}}`
	status, hdr, b, err := w.post(ctx, []byte(body))
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("initialize: status %d: %.200s", status, b)
	}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := decodeResponse(hdr.Get("Content-Type"), b, 0, &res); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if res.ProtocolVersion != pathLegacy {
		return fmt.Errorf("initialize: server chose protocol %q, want %s", res.ProtocolVersion, pathLegacy)
	}
	w.session = hdr.Get("Mcp-Session-Id")
	extra := []string{"Mcp-Protocol-Version", pathLegacy}
	if w.session != "" {
		extra = append(extra, "Mcp-Session-Id", w.session)
	}
	status, _, b, err = w.post(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), extra...)
	if err != nil {
		return fmt.Errorf("notifications/initialized: %w", err)
	}
	if status != http.StatusAccepted {
		return fmt.Errorf("notifications/initialized: status %d, want 202: %.200s", status, b)
	}
	return nil
}

// teardown ends the worker's session, if it has one.
func (w *worker) teardown(ctx context.Context) error {
	if w.session == "" {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, w.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", w.auth)
	req.Header.Set("Mcp-Session-Id", w.session)
	req.Header.Set("Mcp-Protocol-Version", pathLegacy)
	status, _, b, err := do(w.client, req)
	if err != nil {
		return fmt.Errorf("DELETE session: %w", err)
	}
	if status/100 != 2 {
		return fmt.Errorf("DELETE session: status %d: %.200s", status, b)
	}
	w.session = ""
	return nil
}

// call sends one tools/call echo with a text unique to this request and
// checks that the answer echoes it.
func (w *worker) call(ctx context.Context) error {
	w.next++
	id := w.next
	text := "w" + strconv.Itoa(w.idx) + "-" + strconv.FormatInt(id, 10)
	tool := w.tool
	if tool == "" {
		tool = "echo"
	}
	b := w.body[:0]
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"method":"tools/call","params":{"name":"`...)
	b = append(b, tool...)
	b = append(b, `","arguments":{"text":"`...)
	b = append(b, text...)
	b = append(b, `"}`...)
	var extra []string
	if w.path == pathModern {
		b = append(b, ',')
		b = append(b, modernMeta...)
		v := w.version
		if v == "" {
			v = pathModern
		}
		extra = []string{"Mcp-Protocol-Version", v, "Mcp-Method", "tools/call", "Mcp-Name", tool}
	} else {
		extra = []string{"Mcp-Protocol-Version", pathLegacy}
		if w.session != "" {
			extra = append(extra, "Mcp-Session-Id", w.session)
		}
	}
	b = append(b, `}}`...)
	w.body = b
	status, hdr, resp, err := w.post(ctx, b, extra...)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("status %d: %.200s", status, resp)
	}
	return checkEcho(hdr.Get("Content-Type"), resp, id, text)
}

// checkEcho checks a tools/call response: one JSON-RPC response with the
// request's id, no error, not isError, and exactly one text block equal to
// text.
func checkEcho(contentType string, body []byte, id int64, text string) error {
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := decodeResponse(contentType, body, id, &res); err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("tool error: %.200s", body)
	}
	if len(res.Content) != 1 || res.Content[0].Type != "text" || res.Content[0].Text != text {
		return fmt.Errorf("echo answered %.200s, want the text %q", body, text)
	}
	return nil
}

// decodeResponse finds the JSON-RPC response in a JSON or an SSE body,
// checks its id and that it is not an error, and decodes its result into
// result.
func decodeResponse(contentType string, body []byte, id int64, result any) error {
	payload := body
	switch {
	case strings.HasPrefix(contentType, "text/event-stream"):
		// The first event with data; a server with an event store sends
		// an empty priming event first.
		var found bool
		for line := range bytes.Lines(body) {
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok && len(bytes.TrimSpace(d)) > 0 {
				payload, found = bytes.TrimSpace(d), true
				break
			}
		}
		if !found {
			return fmt.Errorf("event stream without data: %.200q", body)
		}
	case strings.HasPrefix(contentType, "application/json"):
	default:
		return fmt.Errorf("unexpected Content-Type %q", contentType)
	}
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(payload, &msg); err != nil {
		return fmt.Errorf("response is not JSON: %v: %.200s", err, payload)
	}
	if msg.JSONRPC != "2.0" || string(msg.ID) != strconv.FormatInt(id, 10) {
		return fmt.Errorf("response jsonrpc %q id %s, want 2.0 and %d", msg.JSONRPC, msg.ID, id)
	}
	if len(msg.Error) > 0 {
		return fmt.Errorf("JSON-RPC error: %.200s", msg.Error)
	}
	if len(msg.Result) == 0 {
		return errors.New("response has no result")
	}
	return json.Unmarshal(msg.Result, result)
}

// failures collects wrong responses: a count and the first few messages.
type failures struct {
	mu    sync.Mutex
	n     int64
	first []string
}

func (f *failures) add(where string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if len(f.first) < 5 {
		f.first = append(f.first, where+": "+err.Error())
	}
}

func (f *failures) count() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// phase runs every worker at once, each sending calls until deadline (or
// perWorker calls when perWorker > 0). With lat non-nil, worker i records
// each call's latency in lat[i]. It returns the number of calls made.
func phase(ctx context.Context, ws []*worker, deadline time.Time, perWorker int, lat [][]time.Duration, fail *failures, where string) int64 {
	var wg sync.WaitGroup
	counts := make([]int64, len(ws))
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				if perWorker > 0 && n >= perWorker || perWorker <= 0 && !time.Now().Before(deadline) || ctx.Err() != nil {
					return
				}
				t := time.Now()
				err := w.call(ctx)
				d := time.Since(t)
				counts[i]++
				if err != nil {
					fail.add(where, err)
					continue
				}
				if lat != nil {
					lat[i] = append(lat[i], d)
				}
			}
		}()
	}
	wg.Wait()
	var total int64
	for _, c := range counts {
		total += c
	}
	return total
}
