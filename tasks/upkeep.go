package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// What the manager does beside its tasks until Shutdown (Run): leases
// renewed, tasks whose replica was lost ended, cancellations by other
// replicas noticed, and a shutdown that lets work finish within a grace.

// Run does the manager's background work until ctx is done: it renews the
// leases of the tasks this replica runs, notices tasks ended elsewhere
// (cancelled through another replica), and fails tasks whose replica
// stopped renewing.
func (m *Manager) Run(ctx context.Context) {
	changed, err := m.store.Subscribe(ctx)
	if m.storeErr("subscribe", err) != nil {
		changed = nil // poll only
	}
	renew := time.NewTicker(m.opts.Lease / 3)
	defer renew.Stop()
	sweep := time.NewTicker(m.opts.Lease / 2)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case id, ok := <-changed:
			if !ok {
				changed = nil
				continue
			}
			m.check(ctx, id)
		case <-renew.C:
			if m.storeErr("ping", m.store.Ping(ctx)) == nil && changed == nil {
				if ch, err := m.store.Subscribe(ctx); m.storeErr("subscribe", err) == nil {
					changed = ch
				}
			}
			m.renew(ctx)
		case <-sweep.C:
			m.sweep(ctx)
		}
	}
}

// check looks at task id, changed somewhere, if this replica runs it.
func (m *Manager) check(ctx context.Context, id string) {
	m.mu.Lock()
	_, local := m.runs[id]
	m.mu.Unlock()
	if !local {
		return
	}
	t, err := m.store.Get(ctx, id)
	if m.storeErr("get", err) != nil {
		return
	}
	m.wakeLocal(id, t.Status.Terminal())
}

// renew extends the lease of every task this replica runs, and stops those
// that ended elsewhere.
func (m *Manager) renew(ctx context.Context) {
	m.mu.Lock()
	ids := make([]string, 0, len(m.runs))
	for id := range m.runs {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	slices.Sort(ids)
	for _, id := range ids {
		t, err := m.store.Update(ctx, id, func(t *Task) error {
			if t.Status.Terminal() {
				return ErrUnchanged
			}
			t.Worker, t.Lease = m.worker, m.now().Add(m.opts.Lease)
			return nil
		})
		if errors.Is(err, ErrNotFound) {
			m.wakeLocal(id, true)
			continue
		}
		if m.storeErr("update", err) != nil {
			continue
		}
		if t.Status.Terminal() {
			m.wakeLocal(id, true)
		}
	}
}

// sweep fails live tasks whose replica stopped renewing their lease.
func (m *Manager) sweep(ctx context.Context) {
	now := m.now()
	if last := m.lastStoreFailure.Load(); last != 0 && now.Sub(time.Unix(0, last)) < m.opts.Lease {
		return // the replicas are still renewing the leases the outage let lapse
	}
	ids, err := m.store.Stale(ctx, now)
	if m.storeErr("stale", err) != nil {
		return
	}
	for _, id := range ids {
		m.mu.Lock()
		_, local := m.runs[id]
		m.mu.Unlock()
		if local {
			continue // this replica runs it: alive, and renews it itself
		}
		lost := false
		var server, tool string
		_, err := m.store.Update(ctx, id, func(t *Task) error {
			if t.Status.Terminal() || !t.Lease.Before(now) {
				return ErrUnchanged
			}
			data, _ := json.Marshal(Error{Code: jsonrpc.CodeInternalError, Message: "The server instance running this task stopped before it finished; call the tool again."})
			t.Status, t.Error = StatusFailed, data
			t.StatusMessage = "The server instance running this task stopped."
			t.InputRequests, t.InputResponses = nil, nil
			t.Updated, t.Expires = now, now.Add(m.opts.Retention)
			lost, server, tool = true, t.Server, t.Tool
			return nil
		})
		if m.storeErr("update", err) == nil && lost {
			m.logger.Warn("task lost its worker; marked failed", "tool", tool)
			m.obs.Lost(server, tool)
		}
	}
}

// Shutdown stops new tasks and waits for running ones until ctx is done;
// those still running then end as failed ("the server stopped").
func (m *Manager) Shutdown(ctx context.Context) {
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	m.mu.Lock()
	m.forced = true
	for _, r := range m.runs {
		r.cancel(ErrStopped)
	}
	m.mu.Unlock()
	m.haltOnce.Do(func() { close(m.halt) })
	<-done
}
