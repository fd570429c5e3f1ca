package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/internal/jsonrpcerr"
)

// serveStdio serves server over newline-delimited JSON-RPC on in and out
// until in ends or ctx ends. out carries nothing but JSON-RPC frames:
// callers must send logs elsewhere (stderr). maxLine bounds one inbound line
// in bytes; zero or less means [sdk.DefaultMaxLineLength].
//
// Bad input never ends serving: a line that is not JSON is answered with a
// -32700 parse error, one that is JSON but not a JSON-RPC 2.0 message (or a
// batch the negotiated protocol version does not allow) with -32600, an
// over-long line is answered with -32600 and skipped, and blank lines are
// ignored. When in ends, every request already read is answered before
// serveStdio returns nil; requests the server sent to the client and that
// are still unanswered then fail, so that the handlers waiting on them can
// finish.
func serveStdio(ctx context.Context, server *sdk.Server, in io.Reader, out io.Writer, maxLine int) error {
	if maxLine <= 0 {
		maxLine = sdk.DefaultMaxLineLength
	}
	err := server.Run(ctx, &stdioTransport{in: in, out: out, maxLine: maxLine})
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// stdioTransport puts a line filter in front of the SDK's [sdk.IOTransport].
//
// The SDK's connection ends at the first line it cannot decode, and once
// its Read has returned an error (io.EOF included) the jsonrpc2 layer
// cancels the calls in flight and refuses to write their replies. So the
// filter reads in line by line, answers what the SDK would choke on itself,
// hands only valid messages to the SDK through a pipe, and at the end of
// in closes that pipe only when every request it handed over is answered.
type stdioTransport struct {
	in      io.Reader
	out     io.Writer
	maxLine int
}

// Connect implements [sdk.Transport].
func (t *stdioTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	pr, pw := io.Pipe()
	out := &lineWriter{w: t.out}
	// The filter bounds lines; the SDK's limit would end the connection.
	inner, err := (&sdk.IOTransport{Reader: pr, Writer: out, MaxLineLength: -1}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	c := &stdioConn{
		Connection:  inner,
		out:         out,
		outstanding: make(map[jsonrpc.ID]bool),
		outgoing:    make(map[jsonrpc.ID]bool),
		changed:     make(chan struct{}),
		closed:      make(chan struct{}),
	}
	go c.filter(ctx, newLineReader(t.in, t.maxLine), pw)
	return c, nil
}

// stdioConn is the SDK's connection, with its writes watched: it counts the
// replies to the requests the filter handed over, the calls the server
// makes to the client, and the protocol version initialize negotiates.
type stdioConn struct {
	sdk.Connection
	out *lineWriter

	mu sync.Mutex
	// outstanding holds the ids of requests handed to the SDK and not yet
	// answered; outgoing those of calls the server made and the client has
	// not answered.
	outstanding map[jsonrpc.ID]bool
	outgoing    map[jsonrpc.ID]bool
	// initializeID is the id of the last initialize request handed over;
	// version is the protocol version its reply negotiated.
	initializeID jsonrpc.ID
	version      string
	// changed is closed, and replaced, when a request is answered or the
	// server makes a call: what the end-of-input drain waits on.
	changed chan struct{}

	closeOnce sync.Once
	closed    chan struct{}
}

// Write implements [sdk.Connection].
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	// The negotiated version is recorded before the reply is written: a
	// client may send its next line as soon as it reads the reply.
	if m, ok := msg.(*jsonrpc.Response); ok && m.Error == nil {
		c.mu.Lock()
		if m.ID == c.initializeID {
			var res struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if json.Unmarshal(m.Result, &res) == nil {
				c.version = res.ProtocolVersion
			}
		}
		c.mu.Unlock()
	}
	err := c.Connection.Write(ctx, msg)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch m := msg.(type) {
	case *jsonrpc.Response:
		// Answered, or the reply cannot be written: either way nothing more
		// will come for this id.
		delete(c.outstanding, m.ID)
		c.notifyLocked()
	case *jsonrpc.Request:
		if m.IsCall() && err == nil {
			c.outgoing[m.ID] = true
			c.notifyLocked()
		}
	}
	return err
}

// Close implements [sdk.Connection].
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Connection.Close()
}

func (c *stdioConn) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Batches were removed from the protocol in this version; the SDK refuses
// them from it on.
const firstVersionWithoutBatches = "2025-06-18"

// filter reads lines from lines until its end, answers those that are not
// valid JSON-RPC, and writes the others to pw, where the SDK reads them.
// At the end of input it waits until every request handed over is
// answered, failing the server's own calls to the client meanwhile, then
// closes pw.
func (c *stdioConn) filter(ctx context.Context, lines *lineReader, pw *io.PipeWriter) {
	var readErr error
	for {
		line, err := lines.next()
		if errors.Is(err, errLineTooLong) {
			c.reply(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: the line is longer than %d bytes", lines.max))
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = fmt.Errorf("mcp: reading stdin: %w", err)
			}
			break
		}
		for _, fwd := range c.check(line) {
			if _, err := pw.Write(append(fwd, '\n')); err != nil {
				return // the connection is closed
			}
		}
	}
	c.drain(ctx, pw)
	pw.CloseWithError(readErr)
}

// check returns the lines to hand to the SDK for line: none when it is
// blank or has been answered here.
//
// A batch's notifications (and replies) are handed over on lines of their
// own, ahead of its calls: the SDK counts every request of a batch,
// notifications included, as awaiting a reply, and would never send the
// batch's replies. JSON-RPC lets a batch be processed in any order.
func (c *stdioConn) check(line []byte) [][]byte {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	if !json.Valid(line) {
		c.reply(nil, jsonrpc.CodeParseError, "Parse error: the line is not valid JSON")
		return nil
	}
	var (
		msgs  []jsonrpc.Message
		calls []json.RawMessage
		fwd   [][]byte
	)
	if line[0] == '[' {
		var raws []json.RawMessage
		if err := json.Unmarshal(line, &raws); err != nil || len(raws) == 0 {
			c.reply(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: an empty batch")
			return nil
		}
		c.mu.Lock()
		version := c.version
		c.mu.Unlock()
		if version >= firstVersionWithoutBatches {
			c.reply(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: JSON-RPC batches are not supported in protocol version "+version)
			return nil
		}
		for i, raw := range raws {
			msg, err := jsonrpc.DecodeMessage(raw)
			if err != nil {
				c.reply(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: batch element %d is not a JSON-RPC 2.0 message", i))
				return nil
			}
			msgs = append(msgs, msg)
			if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
				calls = append(calls, raw)
			} else {
				fwd = append(fwd, raw)
			}
		}
		if len(calls) > 0 {
			batch, err := json.Marshal(calls)
			if err != nil {
				return nil
			}
			fwd = append(fwd, batch)
		}
	} else {
		msg, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			c.reply(idOf(line), jsonrpc.CodeInvalidRequest, "Invalid Request: not a JSON-RPC 2.0 message")
			return nil
		}
		msgs, fwd = []jsonrpc.Message{msg}, [][]byte{line}
	}

	if dup, ok := c.admit(msgs); !ok {
		// The SDK would answer under no id, or end the connection for a
		// batch; the client could tell neither reply from the first one's.
		c.reply(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: request id %v is already in use", dup.Raw()))
		return nil
	}
	return fwd
}

// admit records the calls in msgs as outstanding and the replies in msgs
// as answering the server's calls, unless a call reuses the id of one still
// outstanding or of another in msgs: then it records nothing and returns
// that id.
func (c *stdioConn) admit(msgs []jsonrpc.Message) (dup jsonrpc.ID, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[jsonrpc.ID]bool, len(msgs))
	for _, msg := range msgs {
		if req, isReq := msg.(*jsonrpc.Request); isReq && req.IsCall() {
			if c.outstanding[req.ID] || seen[req.ID] {
				return req.ID, false
			}
			seen[req.ID] = true
		}
	}
	for _, msg := range msgs {
		switch m := msg.(type) {
		case *jsonrpc.Request:
			if m.IsCall() {
				c.outstanding[m.ID] = true
				if m.Method == "initialize" {
					c.initializeID = m.ID
				}
			}
		case *jsonrpc.Response:
			delete(c.outgoing, m.ID)
		}
	}
	return jsonrpc.ID{}, true
}

// drain waits until every request handed to the SDK is answered, ctx ends
// or the connection closes. The server's calls to the client can no longer
// be answered by it, so drain answers them with an error: the handlers
// waiting on them then finish.
func (c *stdioConn) drain(ctx context.Context, pw *io.PipeWriter) {
	failed := make(map[jsonrpc.ID]bool)
	for {
		c.mu.Lock()
		if len(c.outstanding) == 0 {
			c.mu.Unlock()
			return
		}
		var fail []jsonrpc.ID
		for id := range c.outgoing {
			if !failed[id] {
				failed[id] = true
				fail = append(fail, id)
			}
		}
		changed := c.changed
		c.mu.Unlock()
		for _, id := range fail {
			data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
				Code:    jsonrpc.CodeInternalError,
				Message: "the client closed its input",
			}})
			if err != nil {
				continue
			}
			if _, err := pw.Write(append(data, '\n')); err != nil {
				return
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		case <-c.closed:
			return
		}
	}
}

// reply writes an error response that the SDK never sees: to a line it
// could not have decoded. id nil means null.
func (c *stdioConn) reply(id json.RawMessage, code int64, message string) {
	// A failed write means stdout is gone; the SDK's next write ends the
	// connection.
	c.out.Write(jsonrpcerr.Line(id, code, message))
}

// idOf returns the id of a JSON object that is not a valid JSON-RPC
// message, when it has one a reply can carry (a string or a number), else
// nil.
func idOf(line []byte) json.RawMessage {
	var v struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &v) != nil || len(v.ID) == 0 {
		return nil
	}
	var id any
	if json.Unmarshal(v.ID, &id) != nil {
		return nil
	}
	switch id.(type) {
	case string, float64:
		return v.ID
	}
	return nil
}

// lineWriter serializes writes to w: the SDK writes each message in one
// call, and so does the filter, so lines never interleave.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// Close implements io.Closer; the caller owns the underlying writer.
func (w *lineWriter) Close() error { return nil }

// errLineTooLong is returned by [lineReader.next] for a line over the limit.
var errLineTooLong = errors.New("mcp: line too long")

// lineReader splits its input into lines of at most max bytes, newline
// excluded, buffering no more than max bytes of one line. A longer line is
// read to its end, dropped, and reported as errLineTooLong.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, min(max+1, 64<<10)), max: max}
}

// next returns the next line without its newline. The last line need not
// end with one. At the end of input it returns io.EOF.
func (l *lineReader) next() ([]byte, error) {
	l.buf = l.buf[:0]
	tooLong := false
	for {
		chunk, err := l.r.ReadSlice('\n')
		content := chunk
		if err == nil {
			content = chunk[:len(chunk)-1]
		}
		if !tooLong {
			if len(l.buf)+len(content) > l.max {
				tooLong = true
				l.buf = l.buf[:0]
			} else {
				l.buf = append(l.buf, content...)
			}
		}
		switch {
		case err == nil:
			if tooLong {
				return nil, errLineTooLong
			}
			return l.buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case tooLong:
			// The rest of the input, an error or its end, comes next time.
			return nil, errLineTooLong
		case errors.Is(err, io.EOF) && len(l.buf) > 0:
			return l.buf, nil
		default:
			return nil, err
		}
	}
}
