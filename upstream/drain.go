package upstream

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"
)

// defaultDrainGrace is how long a response body may still be read after
// the call that sent the request has ended.
const defaultDrainGrace = 100 * time.Millisecond

// drainTransport keeps connections to an upstream alive across calls.
//
// The SDK client sends each call as a request with the call's context and
// reads the response (an event stream, for most servers) on a goroutine of
// its own, which hands the call its result as soon as it is read and then
// reads the stream to its end so that the connection can be reused. The
// call returns at once, and its context, which ends with it, ends the HTTP
// request: when that wins the race with the last bytes of the stream, the
// transport closes the connection, and the next call dials a new one (with
// TLS, a handshake each).
//
// So the request runs on a context of its own. While the response headers
// are awaited it ends as soon as the call's context does (a cancelled call
// stops at once); once they are in, it ends grace after the call's
// context, or when the body is closed, whichever is first: a body read to
// its end in time keeps its connection, and a stream that goes on is cut
// off after grace.
type drainTransport struct {
	next  http.RoundTripper
	grace time.Duration // 0 means defaultDrainGrace
}

func (t *drainTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	grace := t.grace
	if grace <= 0 {
		grace = defaultDrainGrace
	}
	parent := req.Context()
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	var (
		mu       sync.Mutex
		answered bool        // the response headers are in
		timer    *time.Timer // the grace, once the call ended after them
	)
	stop := context.AfterFunc(parent, func() {
		mu.Lock()
		defer mu.Unlock()
		if !answered {
			cancel()
			return
		}
		timer = time.AfterFunc(grace, cancel)
	})
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	mu.Lock()
	answered = true
	mu.Unlock()
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	resp.Body = &drainBody{ReadCloser: resp.Body, release: func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}}
	return resp, nil
}

// drainBody ends its request's context when it is closed.
type drainBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *drainBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
