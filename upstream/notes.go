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

// countingConn counts the awaited notifications read.
type countingConn struct {
	sdk.Connection
	notes *notes
}

func (c *countingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() && awaited[req.Method] {
		c.notes.addRead()
	}
	return msg, err
}

// awaitNotes waits for the awaited notifications read on sess so far to
// be handled.
func (u *upstream) awaitNotes(ctx context.Context, sess *sdk.ClientSession) {
	if n, ok := u.notes.Load(sess); ok {
		n.(*notes).wait(ctx)
	}
}

// receiving is the middleware of the client's incoming messages: it counts
// the awaited notifications handled, and passes elicitation requests to
// the caller itself (see relay.go) without the SDK client's check of the
// schema, which refuses forms the caller may well show (titled
// multi-select).
func (u *upstream) receiving(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if awaited[method] {
			if cs, ok := req.GetSession().(*sdk.ClientSession); ok {
				if n, ok := u.notes.Load(cs); ok {
					defer n.(*notes).addHandled()
				}
			}
		}
		if r, ok := req.(*sdk.ElicitRequest); ok && method == "elicitation/create" {
			res, err := u.elicit(ctx, r)
			if err != nil {
				return nil, err
			}
			return res, nil
		}
		if r, ok := req.(*sdk.ListRootsRequest); ok && method == "roots/list" {
			res, err := u.listRoots(ctx, r)
			if err != nil {
				return nil, err
			}
			return res, nil
		}
		return next(ctx, method, req)
	}
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
	if err != nil || resp.Body == nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err
	}
	resp.Body = &sseBody{ReadCloser: resp.Body, notes: c.notes}
	return resp, nil
}

// maxSSELine bounds the part of a line sseBody keeps; longer data lines
// (large results) cannot be awaited notifications, which are small.
const maxSSELine = 64 << 10

type sseBody struct {
	io.ReadCloser
	notes *notes
	line  []byte // the current line, up to maxSSELine
	long  bool   // the current line is longer than maxSSELine
	data  []byte // the current event's data
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
