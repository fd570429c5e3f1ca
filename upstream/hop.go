//lint:file-ignore SA1019 the 2026-07-28 revision deprecates MCP logging; upstreams still send log messages within a call, and the hop passes them on

package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
)

// The direct hop. A tools/call to an http upstream that speaks 2026-07-28
// is one HTTP request and its answer: no session state, nothing on the
// connection between calls. The SDK client makes that exchange through its
// JSON-RPC connection — a writer, a goroutine per response stream, a
// channel hand-off to the call, a second reader of the stream to count its
// notifications (sseCounter), a context per request to keep the connection
// (drainTransport) — which costs about as much CPU as the upstream's own
// handling of the call. The hop sends the call itself instead: the params
// the SDK client would send, encoded as a JSON-RPC request by the SDK's
// jsonrpc package, posted with the headers the SDK client would set over
// the same HTTP client (the upstream's credentials, the pooled
// connections, the client span), and the answer read on the call's own
// goroutine, in order: progress and log messages go to the caller as they
// come (so the result needs no wait for them, see notes), the response is
// decoded by the jsonrpc package into the SDK's result type (or, for a
// direct call, passed on as it came, see catalog.DirectHandler).
// prompts/get and resources/read go the same way (send); listing,
// completion, subscriptions and the tasks/ methods take the SDK client.
//
// The hop and the SDK client session are the two senders of a request
// (sender.go): everything else of the call is the same code on both ways
// (call): the caller's capabilities and log level (caller.go),
// multi-round-trip results (mrtr.go), task handles (tasks.go), errors
// passed on, the StartCall hook's span and metrics. A call the hop cannot
// make takes the SDK client, decided per call by senderFor: an upstream
// of an older era or one that keeps sessions (an Mcp-Session-Id), a tool
// whose input schema binds arguments to headers (x-mcp-header: the SDK
// client writes them).
// A per_principal upstream's calls take the hop of the caller's own
// session, whose HTTP client sends the caller's exchanged token.

// maxHopEvent bounds one event of an answer's event stream, and an answer
// in JSON: a larger answer fails the call.
const maxHopEvent = 32 << 20

// hop makes calls to one session of an http upstream: it is that
// session's sender (sender.go) for the requests it can make.
type hop struct {
	// n takes what the upstream sends within a call besides its answer.
	n      notices
	logger *slog.Logger
	client *http.Client
	url    string
	// headers are the upstream's configured headers, set on each request
	// (instead of by headerTransport, which copies the request too).
	headers http.Header
	version string // the protocol version the session negotiated
	impl    *sdk.Implementation
	nextID  atomic.Int64
	sent    atomic.Int64 // requests sent
}

// newHop returns the hop of the session sess opened through t, or nil if
// calls on it take the SDK client. It sends as the client impl, and hands
// what the upstream sends besides its answers to n.
func newHop(n notices, logger *slog.Logger, impl *sdk.Implementation, t sdk.Transport, sess *sdk.ClientSession) *hop {
	st, ok := t.(*sdk.StreamableClientTransport)
	// A server that gave the session an id expects it on every request,
	// which the SDK client sends and the hop does not.
	if !ok || st.HTTPClient == nil || protocolVersion(sess) < statelessEra || sess.ID() != "" {
		return nil
	}
	c := *st.HTTPClient
	// The hop reads each answer to its end on the call's goroutine, and
	// counts no notifications: the SDK client's wrappers are not needed.
	rt := c.Transport
	if s, ok := rt.(*sseCounter); ok {
		rt = s.next
	}
	if d, ok := rt.(*drainTransport); ok {
		rt = d.next
	}
	h := &hop{n: n, logger: logger, url: st.Endpoint, version: protocolVersion(sess), impl: impl}
	if ht, ok := rt.(*headerTransport); ok {
		rt, h.headers = ht.next, ht.headers
	}
	c.Transport = rt
	h.client = &c
	return h
}

// hasHeaderBindings reports whether an input schema marks arguments
// x-mcp-header, which the SDK client sends as Mcp-Param-* headers.
func hasHeaderBindings(schema json.RawMessage) bool {
	return bytes.Contains(schema, []byte(`"x-mcp-header"`))
}

// errNoResponse is the error of a call whose answer ended without its
// response; streamEnded recognizes it, as the SDK client's.
var errNoResponse = errors.New("request terminated without response")

// callTool sends params as a tools/call and returns the upstream's result:
// for a direct call (t.direct) a complete one as it came, a
// *catalog.RawToolResult, otherwise a *sdk.CallToolResult.
// Progress and log messages in the answer go to the caller of t (with the
// progress token the caller gave, see relay.progress); a task handle goes
// to capture, if any. An upstream's JSON-RPC error is returned as the
// *jsonrpc.Error.
func (h *hop) callTool(ctx context.Context, t *callTarget, capture *taskCapture, params *sdk.CallToolParams) (sdk.Result, error) {
	params.Meta = h.requestMeta(params.Meta)
	if params.Arguments == nil {
		params.Arguments = map[string]any{}
	}
	msg, err := h.send(ctx, t, "tools/call", params.Name, params)
	if err != nil {
		return nil, err
	}
	if capture != nil {
		capture.offer(msg)
	}
	if t.direct {
		// A complete result goes to the caller as it came. Any other is
		// decoded, as on the SDK client's way: one that asks for input,
		// for its requestState (mrtr.go); a task handle, taken by the
		// capture above when the caller may have one, and dropped to an
		// empty result when it may not.
		var probe struct {
			ResultType string `json:"resultType"`
			IsError    bool   `json:"isError"`
			Meta       struct {
				ServerInfo json.RawMessage `json:"io.modelcontextprotocol/serverInfo"`
			} `json:"_meta"`
		}
		// Member names match exactly, as the SDK decodes them.
		if _, err := segjson.Parse(msg.Result, &probe, segjson.DontMatchCaseInsensitiveStructFields|segjson.ZeroCopy); err != nil {
			return nil, fmt.Errorf("upstream: decoding the result: %w", err)
		}
		if probe.ResultType == "" || probe.ResultType == "complete" {
			return &catalog.RawToolResult{
				JSON:          msg.Result,
				IsError:       probe.IsError,
				NamesServer:   len(probe.Meta.ServerInfo) > 0,
				HasResultType: probe.ResultType != "",
			}, nil
		}
	}
	var res sdk.CallToolResult
	if err := json.Unmarshal(msg.Result, &res); err != nil {
		return nil, fmt.Errorf("upstream: decoding the result: %w", err)
	}
	return &res, nil
}

// getPrompt sends params as a prompts/get and returns the upstream's
// result, as callTool does (a result of that type only).
func (h *hop) getPrompt(ctx context.Context, t *callTarget, params *sdk.GetPromptParams) (sdk.Result, error) {
	params.Meta = h.requestMeta(params.Meta)
	return decodeInto(&sdk.GetPromptResult{})(h.send(ctx, t, "prompts/get", params.Name, params))
}

// readResource sends params as a resources/read and returns the
// upstream's result, as getPrompt does.
func (h *hop) readResource(ctx context.Context, t *callTarget, params *sdk.ReadResourceParams) (sdk.Result, error) {
	params.Meta = h.requestMeta(params.Meta)
	return decodeInto(&sdk.ReadResourceResult{})(h.send(ctx, t, "resources/read", params.URI, params))
}

// decodeInto returns a function that decodes the result of the response
// send returned into res.
func decodeInto(res sdk.Result) func(*jsonrpc.Response, error) (sdk.Result, error) {
	return func(msg *jsonrpc.Response, err error) (sdk.Result, error) {
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(msg.Result, res); err != nil {
			return nil, fmt.Errorf("upstream: decoding the result: %w", err)
		}
		return res, nil
	}
}

// requestMeta is m with what the SDK client adds to a request on
// 2026-07-28 (injectRequestMeta) where callerMeta set nothing: the
// protocol version and the client's name.
func (h *hop) requestMeta(m sdk.Meta) sdk.Meta {
	if m == nil {
		m = sdk.Meta{}
	}
	if _, ok := m[sdk.MetaKeyProtocolVersion]; !ok {
		m[sdk.MetaKeyProtocolVersion] = h.version
	}
	if _, ok := m[sdk.MetaKeyClientInfo]; !ok {
		m[sdk.MetaKeyClientInfo] = h.impl
	}
	return m
}

// send posts a request of method with params, whose Mcp-Name header is
// name, and returns the upstream's response to it; notifications on the
// way go to the caller of t. An upstream's JSON-RPC error is returned as
// the *jsonrpc.Error.
func (h *hop) send(ctx context.Context, t *callTarget, method, name string, params any) (*jsonrpc.Response, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("upstream: encoding the request: %w", err)
	}
	id, err := jsonrpc.MakeID(float64(h.nextID.Add(1)))
	if err != nil {
		return nil, err
	}
	body, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: id, Method: method, Params: raw})
	if err != nil {
		return nil, fmt.Errorf("upstream: encoding the request: %w", err)
	}
	h.sent.Add(1)
	resp, err := h.post(ctx, body, method, name)
	if err != nil {
		return nil, fmt.Errorf("sending %q: %w", method, err)
	}
	msg, err := h.answer(ctx, t, resp, id, method)
	keep(resp.Body)
	if err != nil {
		return nil, err
	}
	if msg.Error != nil {
		return nil, msg.Error
	}
	return msg, nil
}

// post posts body, a JSON-RPC message, to the upstream with the headers
// the SDK client would set and the upstream's configured ones: for a
// request (method, not ""), Mcp-Method and Mcp-Name (name) too.
func (h *hop) post(ctx context.Context, body []byte, method, name string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = http.Header{
		"Content-Type":            {"application/json"},
		"Accept":                  {"application/json, text/event-stream"},
		mcpheader.ProtocolVersion: {h.version},
	}
	if method != "" {
		req.Header[mcpheader.Method] = []string{method}
		req.Header[mcpheader.Name] = []string{name}
	}
	for k, v := range h.headers {
		req.Header[k] = v
	}
	return h.client.Do(req)
}

// answer reads the upstream's answer to the request id: a JSON body, or
// an event stream whose notifications go to the caller of t on the way.
func (h *hop) answer(ctx context.Context, t *callTarget, resp *http.Response, id jsonrpc.ID, method string) (*jsonrpc.Response, error) {
	ct := mediaType(resp.Header.Get("Content-Type"))
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	switch {
	case ct == "application/json":
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxHopEvent+1))
		if err != nil {
			return nil, fmt.Errorf("reading the answer: %w", err)
		}
		msg, _ := jsonrpc.DecodeMessage(data)
		if r, isResp := msg.(*jsonrpc.Response); isResp && (ok || r.Error != nil) && len(data) <= maxHopEvent {
			return r, nil
		}
		if !ok {
			return nil, statusError(method, resp)
		}
		return nil, fmt.Errorf("the answer is not a JSON-RPC response")
	case !ok:
		return nil, statusError(method, resp)
	case ct == "text/event-stream":
		return h.stream(ctx, t, resp.Body, id)
	}
	return nil, fmt.Errorf("unsupported content type %q", ct)
}

// mediaType is the media type of a Content-Type value, in lower case,
// without its parameters (mime.ParseMediaType, without the map of them).
func mediaType(v string) string {
	if i := strings.IndexByte(v, ';'); i >= 0 {
		v = v[:i]
	}
	return strings.ToLower(strings.TrimSpace(v))
}

// maxDrain bounds what is read of an answer after its response, so
// that the connection is kept for the next call.
const maxDrain = 64 << 10

// keep reads what is left of an answer, for at most defaultDrainGrace
// and maxDrain bytes, and closes it: a body read to its end keeps its
// connection (see drainTransport); a stream that goes on is cut off.
func keep(body io.ReadCloser) {
	t := time.AfterFunc(defaultDrainGrace, func() { body.Close() })
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxDrain))
	t.Stop()
	body.Close()
}

func statusError(method string, resp *http.Response) error {
	return fmt.Errorf("sending %q: %s", method, http.StatusText(resp.StatusCode))
}

// scanBufs are the first buffers of the event streams' scanners (a
// larger event gets a larger buffer of its own).
var scanBufs = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}

// stream reads an event stream (text/event-stream) until the response to
// id, passing notifications on to the caller of t.
func (h *hop) stream(ctx context.Context, t *callTarget, body io.Reader, id jsonrpc.ID) (*jsonrpc.Response, error) {
	buf := scanBufs.Get().(*[]byte)
	defer scanBufs.Put(buf)
	sc := bufio.NewScanner(body)
	sc.Buffer(*buf, maxHopEvent)
	var data []byte // the event's data lines, joined by newlines
	lines := 0
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) > 0 {
			// Only data lines matter: event types, ids and retry hints
			// are for resuming, which a call made again does instead.
			if v, found := bytes.CutPrefix(line, []byte("data:")); found {
				if lines++; lines > 1 {
					data = append(data, '\n')
				}
				data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
			}
			continue
		}
		if len(bytes.TrimSpace(data)) == 0 { // no event, or one without data
			data, lines = nil, 0
			continue
		}
		// A decoded message may point into data: the next event's data
		// goes into a new slice.
		msg, err := jsonrpc.DecodeMessage(data)
		data, lines = nil, 0
		if err != nil {
			return nil, fmt.Errorf("decoding an event of the answer: %w", err)
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			if m.ID == id {
				return m, nil
			}
		case *jsonrpc.Request:
			h.notify(ctx, t, m)
		}
	}
	if err := sc.Err(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	return nil, errNoResponse
}

// notify passes a notification the upstream sent within the call to the
// caller of t, as the SDK client's handlers do with those of a session,
// and refuses a request (see refuse).
func (h *hop) notify(ctx context.Context, t *callTarget, m *jsonrpc.Request) {
	if m.IsCall() {
		h.refuse(ctx, m)
		return
	}
	switch m.Method {
	case "notifications/progress":
		var p sdk.ProgressNotificationParams
		if json.Unmarshal(m.Params, &p) == nil {
			h.n.progress(ctx, &p)
		}
	case "notifications/message":
		var p sdk.LoggingMessageParams
		if t.session != nil && json.Unmarshal(m.Params, &p) == nil {
			h.n.logMessage(t, &p)
		}
	case "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed":
		h.n.listChanged()
	case "notifications/resources/updated":
		var p sdk.ResourceUpdatedNotificationParams
		if json.Unmarshal(m.Params, &p) == nil {
			h.n.resourceUpdated(ctx, p.URI)
		}
	default:
		h.logger.Debug("upstream: a notification within a call is dropped", "method", strings.Clone(m.Method))
	}
}

// refuse answers the request m, which the upstream sent within a call,
// with the JSON-RPC error that the SDK client's way answers it with
// (refuseStateless: a hop's session is always of the 2026-07-28 era),
// posted as the SDK client posts its answers.
func (h *hop) refuse(ctx context.Context, m *jsonrpc.Request) {
	body, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: m.ID, Error: h.n.refuseStateless(m.Method, h.version)})
	if err == nil {
		var resp *http.Response
		if resp, err = h.post(ctx, body, "", ""); err == nil {
			keep(resp.Body)
			if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusNoContent {
				err = statusError("the answer", resp)
			}
		}
	}
	if err != nil {
		h.logger.Debug("upstream: answering a request within a call failed", "method", strings.Clone(m.Method), "error", err)
	}
}
