package limits

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultReadBodyTimeout bounds reading a request body when
// server.read_body_timeout is not set.
const DefaultReadBodyTimeout = 30 * time.Second

// ErrBodyReadTimeout is the error a request body read returns under
// [BodyDeadline] when the body did not arrive in time. A handler that sees
// it answers 408 (the connection is closed after the answer).
var ErrBodyReadTimeout = errors.New("limits: request body not received in time")

// maxDrain is how much of a body its handler left unread [BodyDeadline]
// reads to keep the connection, as net/http itself would
// (maxPostHandlerReadBytes); more, and net/http closes the connection.
const maxDrain = 256 << 10

// BodyDeadline returns middleware that bounds, in time, the reading of a
// request's body: timeout after the handler starts, reads fail with an
// error matching [ErrBodyReadTimeout], the event is reported to hook as
// [LimitBodyReadTimeout], and net/http closes the connection after the
// answer. A client that sends headers and then trickles its body, or never
// ends it, holds a goroutine for timeout at most.
//
// The bound is a read deadline on the connection, set before the handler
// runs and cleared as soon as the body has been read to its end, so a
// long-lived response (an SSE stream) is not cut off; it is not
// [http.Server.ReadTimeout], which would be. Requests without a body are
// left alone, and so are servers whose connections cannot take a
// deadline.
//
// A body the handler did not read is read here after the handler
// returns, as net/http would before reusing the connection, under the
// same deadline, so that a client that never sends it is also cut off
// and counted. Unless the handler's answer says "Connection: close" (the
// refusals of auth and of the origin check, which need no body): then
// the connection is not reused, nothing waits for the body, and the
// answer goes out as soon as the handler returns.
//
// It belongs outermost, before authentication: the slow client needs no
// token.
func BodyDeadline(timeout time.Duration, hook Hook) func(http.Handler) http.Handler {
	if hook == nil {
		hook = func(context.Context, Event) {}
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if timeout <= 0 || r.Body == nil || r.Body == http.NoBody {
				next.ServeHTTP(w, r)
				return
			}
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(timeout)) != nil {
				next.ServeHTTP(w, r)
				return
			}
			b := &deadlineBody{body: r.Body, rc: rc, ctx: r.Context(), hook: hook}
			r.Body = b
			next.ServeHTTP(w, r)
			if closesConnection(w.Header()) {
				b.abandon()
				return
			}
			b.drain(r.ContentLength)
		})
	}
}

// deadlineBody is a request body read under a connection read deadline.
type deadlineBody struct {
	body io.ReadCloser
	rc   *http.ResponseController
	ctx  context.Context
	hook Hook

	mu       sync.Mutex
	read     int64
	done     bool // read to its end, or failed: the deadline no longer matters
	timedOut bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.read += int64(n)
	switch {
	case err == nil || b.done:
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.done, b.timedOut = true, true
		b.hook(b.ctx, Event{Limit: LimitBodyReadTimeout})
		return n, ErrBodyReadTimeout
	case err == io.EOF:
		b.done = true
		// The response may stream for long: the read that watches for the
		// client going away must not hit the deadline. (net/http clears it
		// too when it starts that read; this does not rely on it.)
		b.rc.SetReadDeadline(time.Time{})
	default:
		b.done = true
	}
	if b.timedOut {
		return n, ErrBodyReadTimeout
	}
	return n, err
}

func (b *deadlineBody) Close() error { return b.body.Close() }

// drain reads what the handler left of a body of length size (-1 when
// unknown), up to maxDrain, under the deadline.
func (b *deadlineBody) drain(size int64) {
	b.mu.Lock()
	done, read := b.done, b.read
	b.mu.Unlock()
	if done || (size >= 0 && size-read > maxDrain) {
		return
	}
	io.CopyN(io.Discard, b, maxDrain+1)
}

// abandon gives up on what is left of the body, for an answer that closes
// the connection: net/http, which reads a body's rest when it closes it,
// then fails at once instead of waiting for a client that may never send
// it. Not counted: the client was not too slow, it was not waited for.
func (b *deadlineBody) abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done {
		b.done = true
		b.rc.SetReadDeadline(time.Now())
	}
}

// closesConnection reports whether a response header says
// "Connection: close".
func closesConnection(h http.Header) bool {
	for _, v := range h.Values("Connection") {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), "close") {
				return true
			}
		}
	}
	return false
}
