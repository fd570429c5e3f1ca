package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK hands a call's result to the caller as soon as it is read, and
// the notifications read before it to their handlers one at a time on
// another goroutine: a progress or log message the upstream sent before its
// result may be handled after the call returned, when its caller's request
// is over. notes counts the notifications of those kinds read from a
// connection and handled, so that a call can wait, after its result, for
// those read before it. A Streamable HTTP connection cannot be wrapped (see
// keptTransport): its notifications are counted as the SSE streams of its
// responses are read (sseCounter).

// notesGrace bounds that wait: a notification the SDK drops unhandled
// (invalid params) holds one call this long, and is then written off.
const notesGrace = time.Second

// awaited are the notifications a call's result waits for.
var awaited = map[string]bool{"notifications/progress": true, "notifications/message": true}

type notes struct {
	mu      sync.Mutex
	read    uint64
	handled uint64
	more    chan struct{} // closed and replaced when handled grows
}

func (n *notes) addRead() {
	n.mu.Lock()
	n.read++
	n.mu.Unlock()
}

func (n *notes) addHandled() {
	n.mu.Lock()
	n.handled++
	if n.more != nil {
		close(n.more)
		n.more = nil
	}
	n.mu.Unlock()
}

// wait returns once every notification read so far is handled, ctx is
// done or notesGrace has passed.
func (n *notes) wait(ctx context.Context) {
	n.mu.Lock()
	target := n.read
	n.mu.Unlock()
	var timer *time.Timer
	for {
		n.mu.Lock()
		if n.handled >= target {
			n.mu.Unlock()
			break
		}
		if n.more == nil {
			n.more = make(chan struct{})
		}
		more := n.more
		n.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(notesGrace)
		}
		select {
		case <-more:
			continue
		case <-ctx.Done():
		case <-timer.C:
			// One the SDK dropped unhandled must not hold later calls.
			n.mu.Lock()
			n.handled = max(n.handled, target)
			n.mu.Unlock()
		}
		break
	}
	if timer != nil {
		timer.Stop()
	}
}

// countingConn counts the awaited notifications read, and hands the
// responses to calls that may be answered with a task to their capture
// (tasks.go).
type countingConn struct {
	sdk.Connection
	notes    *notes
	captures sync.Map // jsonrpc.ID → *taskCapture
}

func (c *countingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	req, ok := msg.(*jsonrpc.Request)
	capture := captureOf(ctx)
	if !ok || !req.IsCall() || capture == nil {
		return c.Connection.Write(ctx, msg)
	}
	c.captures.Store(req.ID, capture)
	err := c.Connection.Write(ctx, msg)
	if err != nil {
		c.captures.Delete(req.ID)
	}
	return err
}

func (c *countingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if !m.IsCall() && awaited[m.Method] {
			c.notes.addRead()
		}
	case *jsonrpc.Response:
		if capture, ok := c.captures.LoadAndDelete(m.ID); ok {
			capture.(*taskCapture).offer(m)
		}
	}
	return msg, err
}

// sseCounter counts the awaited notifications in the SSE streams of an
// http upstream's responses, as the SDK reads them: an event is counted
// when the blank line that ends it is read, before the SDK can hand it on.
type sseCounter struct {
	next  http.RoundTripper
	notes *notes
}

func (c *sseCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	capture := captureOf(r.Context()) // a call that may be answered with a task (tasks.go)
	switch ct := resp.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "text/event-stream"):
		resp.Body = &sseBody{ReadCloser: resp.Body, notes: c.notes, capture: capture}
	case capture != nil && strings.HasPrefix(ct, "application/json"):
		resp.Body = &jsonCapture{ReadCloser: resp.Body, capture: capture}
	}
	return resp, nil
}

// maxSSELine bounds the part of a line sseBody keeps; longer data lines
// (large results) cannot be awaited notifications, which are small.
const maxSSELine = 64 << 10

type sseBody struct {
	io.ReadCloser
	notes   *notes
	capture *taskCapture // nil: none
	line    []byte       // the current line, up to maxSSELine
	long    bool         // the current line is longer than maxSSELine
	data    []byte       // the current event's data
}

func (b *sseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	for _, c := range p[:n] {
		if c != '\n' {
			if len(b.line) < maxSSELine {
				b.line = append(b.line, c)
			} else {
				b.long = true
			}
			continue
		}
		b.endLine()
	}
	return n, err
}

func (b *sseBody) endLine() {
	line := bytes.TrimSuffix(b.line, []byte("\r"))
	long := b.long
	b.line, b.long = b.line[:0], false
	switch {
	case len(line) == 0:
		if isAwaited(b.data) {
			b.notes.addRead()
		}
		if b.capture != nil && len(b.data) > 0 {
			b.capture.offerData(b.data)
		}
		b.data = b.data[:0]
	case long:
		b.data = append(b.data[:0], '!') // not JSON: not counted
	case bytes.HasPrefix(line, []byte("data:")):
		d := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
		if len(b.data) > 0 {
			b.data = append(b.data, '\n')
		}
		b.data = append(b.data, d...)
	}
}

// isAwaited reports whether data is an awaited notification.
func isAwaited(data []byte) bool {
	if len(data) == 0 {
		return false
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	return json.Unmarshal(data, &m) == nil && m.ID == nil && awaited[m.Method]
}
