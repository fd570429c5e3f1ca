package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/tasks"
)

// Task handles on the wire (tasks.go has what is done with them). The SDK
// client (v1.8.0) knows no tasks: it decodes a task handle as a
// CallToolResult and drops its members. So the call's raw result is
// captured as it is read — from the HTTP response of the call (sseCounter)
// or the connection (countingConn) — when the call's context asks for it.
// The tasks/ methods are sent as custom methods with raw params and
// results.

// taskMethods are the methods of the tasks extension sent to upstreams.
var taskMethods = []string{"tasks/get", "tasks/update", "tasks/cancel"}

type captureKey struct{}

// maxCapture bounds a JSON response read for a task handle, which is
// small; a larger one is not a task handle.
const maxCapture = 1 << 20

// taskCapture holds the raw result of a call that the upstream answered
// with a task handle.
type taskCapture struct {
	mu  sync.Mutex
	raw json.RawMessage
}

func withCapture(ctx context.Context, c *taskCapture) context.Context {
	return context.WithValue(ctx, captureKey{}, c)
}

func captureOf(ctx context.Context) *taskCapture {
	c, _ := ctx.Value(captureKey{}).(*taskCapture)
	return c
}

// offer keeps the result of msg if it is a task handle.
func (c *taskCapture) offer(msg jsonrpc.Message) {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || resp.Error != nil || len(resp.Result) == 0 {
		return
	}
	var r struct {
		ResultType string `json:"resultType"`
	}
	if json.Unmarshal(resp.Result, &r) != nil || r.ResultType != "task" {
		return
	}
	c.mu.Lock()
	c.raw = bytes.Clone(resp.Result)
	c.mu.Unlock()
}

// offerData keeps the result of the encoded message data if it is a task
// handle.
func (c *taskCapture) offerData(data []byte) {
	if msg, err := jsonrpc.DecodeMessage(data); err == nil {
		c.offer(msg)
	}
}

func (c *taskCapture) result() json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.raw
}

// jsonCapture reads a JSON response body for a task handle as the SDK
// reads it.
type jsonCapture struct {
	io.ReadCloser
	capture *taskCapture
	buf     []byte
	over    bool
}

func (b *jsonCapture) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if !b.over {
		if len(b.buf)+n > maxCapture {
			b.over, b.buf = true, nil
		} else {
			b.buf = append(b.buf, p[:n]...)
		}
	}
	if err == io.EOF && !b.over {
		b.capture.offerData(b.buf)
		b.buf = nil
	}
	return n, err
}

// rawParams are the params of a tasks/ method sent upstream: the caller's
// members, and the _meta of Portcullis's request.
type rawParams struct {
	sdk.ParamsBase
	fields map[string]json.RawMessage
}

func (p *rawParams) MarshalJSON() ([]byte, error) {
	m := make(map[string]json.RawMessage, len(p.fields)+1)
	for k, v := range p.fields {
		m[k] = v
	}
	if len(p.Meta) > 0 {
		b, err := json.Marshal(p.Meta)
		if err != nil {
			return nil, err
		}
		m["_meta"] = b
	}
	return json.Marshal(m)
}

// rawResult is the result of a tasks/ method as the upstream sent it.
type rawResult struct {
	sdk.ResultBase
	raw json.RawMessage
}

func (r *rawResult) UnmarshalJSON(data []byte) error {
	r.raw = bytes.Clone(data)
	return nil
}

// registerTaskMethods lets c send the tasks/ methods.
func registerTaskMethods(c *sdk.Client) {
	for _, m := range taskMethods {
		if err := sdk.AddSendingCustomMethod[*rawParams, *rawResult](c, m); err != nil {
			panic(err) // only a standard method's name fails, and these are not
		}
	}
}

// offersTasks reports whether the upstream of sess offers the tasks
// extension on 2026-07-28.
func offersTasks(sess *sdk.ClientSession) bool {
	r := sess.InitializeResult()
	if r == nil || r.ProtocolVersion < statelessEra || r.Capabilities == nil {
		return false
	}
	_, ok := r.Capabilities.Extensions[tasks.ExtensionID]
	return ok
}

// tasksCapability adds the tasks extension to the client capabilities of
// meta, as callerMeta wrote them.
func tasksCapability(meta sdk.Meta) {
	caps, ok := meta[sdk.MetaKeyClientCapabilities].(map[string]any)
	if !ok {
		caps = map[string]any{}
		meta[sdk.MetaKeyClientCapabilities] = caps
	}
	ext, ok := caps["extensions"].(map[string]any)
	if !ok {
		ext = map[string]any{}
		caps["extensions"] = ext
	}
	ext[tasks.ExtensionID] = map[string]any{}
}
