package mcp

import (
	"context"
	"net/http"
	"sync"
)

// openStreams are the standalone GET streams a handler serves, which a
// drain ends.
type openStreams struct {
	mu       sync.Mutex
	draining bool
	cancels  map[*context.CancelFunc]struct{}
}

func newOpenStreams() *openStreams {
	return &openStreams{cancels: make(map[*context.CancelFunc]struct{})}
}

// serve serves a standalone GET stream through next, until a drain ends
// it; once draining, it refuses the stream with 503.
func (o *openStreams) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	o.mu.Lock()
	if o.draining {
		o.mu.Unlock()
		http.Error(w, "Service Unavailable: draining", http.StatusServiceUnavailable)
		return
	}
	o.cancels[&cancel] = struct{}{}
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		delete(o.cancels, &cancel)
		o.mu.Unlock()
	}()
	next.ServeHTTP(w, r.WithContext(ctx))
}

// drain ends every open stream and refuses new ones.
func (o *openStreams) drain() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.draining = true
	for c := range o.cancels {
		(*c)()
	}
}

// isDraining reports whether drain was called.
func (o *openStreams) isDraining() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.draining
}
