package observability

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A ReadinessCheck reports whether one dependency is ready. It must return
// quickly and must not call anything a liveness probe could be hurt by.
type ReadinessCheck func(ctx context.Context) error

// Health serves liveness (/healthz) and readiness (/readyz).
//
// Liveness says only that the process serves HTTP: it never calls a
// dependency, so a slow identity provider cannot get pods restarted.
// Readiness fails while the server drains and while any registered check
// fails, so a load balancer stops sending new work first.
type Health struct {
	draining atomic.Bool

	mu     sync.Mutex
	names  []string
	checks []ReadinessCheck
}

// AddCheck registers a readiness check under name, which is all /readyz
// says when the check fails (say "issuer keys not loaded"). The check's
// error is never shown: /readyz is public, and the error may carry a
// dependency's own error text or URLs; the dependency logs it.
func (h *Health) AddCheck(name string, check ReadinessCheck) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.names = append(h.names, name)
	h.checks = append(h.checks, check)
}

// SetDraining makes readiness fail from now on.
func (h *Health) SetDraining() { h.draining.Store(true) }

// Draining reports whether SetDraining was called.
func (h *Health) Draining() bool { return h.draining.Load() }

// ServeLive answers liveness probes.
func (h *Health) ServeLive(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprintln(w, "ok")
}

// ServeReady answers readiness probes: 200 when ready, 503 naming what is
// not ready (draining, or the names of the failing checks) otherwise.
func (h *Health) ServeReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	var problems []string
	if h.draining.Load() {
		problems = append(problems, "draining")
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	h.mu.Lock()
	names, checks := h.names, h.checks
	h.mu.Unlock()
	for i, check := range checks {
		if err := check(ctx); err != nil {
			problems = append(problems, names[i])
		}
	}
	if len(problems) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready: "+strings.Join(problems, "; "))
		return
	}
	fmt.Fprintln(w, "ok")
}
