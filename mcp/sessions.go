package mcp

import (
	"context"
	"net/http"
)

// serveStream serves a standalone GET stream, which Drain can end.
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		http.Error(w, "Service Unavailable: draining", http.StatusServiceUnavailable)
		return
	}
	h.streams[&cancel] = struct{}{}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.streams, &cancel)
		h.mu.Unlock()
	}()
	h.stateful.ServeHTTP(w, r.WithContext(ctx))
}

// Drain ends every open GET stream and refuses new ones, so that an
// [http.Server.Shutdown] waits only for calls in flight. Clients reconnect to
// another replica.
func (h *Handler) Drain() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.draining = true
	for c := range h.streams {
		(*c)()
	}
}
