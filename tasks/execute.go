package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.opentelemetry.io/otel/trace"
)

// A task's life on the replica that runs it: started (Start), its work
// run round by round while it asks for input (execute), and its end
// recorded (finish), retried while the store does not answer.

// Start creates a task of tool owned by owner and runs work for it in the
// background, detached from ctx's cancellation but keeping its values. It
// returns once the task can be read back from any replica. The task is
// the server's that ctx names (see [WithServer]).
func (m *Manager) Start(ctx context.Context, owner, tool string, work Work) (*Task, error) {
	// Counted before the task is saved, so that a Shutdown that begins
	// meanwhile waits for it.
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return nil, ErrStopped
	}
	m.wg.Add(1)
	m.mu.Unlock()
	running := false
	defer func() {
		if !running {
			m.wg.Done()
		}
	}()
	now := m.now()
	server := serverOf(ctx)
	t := &Task{
		ID: newID(), Owner: owner, Tool: tool, Server: server, Status: StatusWorking,
		Created: now, Updated: now, Expires: now.Add(m.opts.TTL),
		PollInterval: m.opts.PollInterval,
		Worker:       m.worker, Lease: now.Add(m.opts.Lease),
		Trace: traceparent(ctx),
	}
	caps := Caps{PerOwner: max(m.opts.MaxPerPrincipal, 0), Total: max(m.opts.MaxTotal, 0)}
	if err := m.storeErr("create", m.store.Create(ctx, t, caps)); err != nil {
		switch {
		case errors.Is(err, ErrOwnerCap):
			m.obs.Refused(server, tool, RefusedOwnerCap)
		case errors.Is(err, ErrTotalCap):
			m.obs.Refused(server, tool, RefusedTotalCap)
		default:
			m.obs.Refused(server, tool, RefusedStoreError)
		}
		return nil, err
	}
	runCtx, cancel := context.WithCancelCause(WithTaskID(WithStarter(context.WithoutCancel(ctx), nil), t.ID))
	// The work must end before the store may forget the live task (at
	// Expires), or its failure could not be recorded: it gets a tenth of
	// the TTL less, at most ttlMargin.
	runCtx, cancelTTL := context.WithDeadline(runCtx, t.Expires.Add(-min(m.opts.TTL/10, ttlMargin)))
	r := &run{server: server, tool: tool, started: now, cancel: cancel, wake: make(chan struct{}, 1)}
	m.mu.Lock()
	m.runs[t.ID] = r
	if m.forced {
		cancel(ErrStopped) // Shutdown gave up waiting while the task was saved
	}
	m.mu.Unlock()
	running = true
	m.obs.Created(server, tool)
	m.obs.Live(server, StatusWorking, 1)
	go func() {
		defer m.wg.Done()
		defer cancelTTL()
		m.execute(runCtx, t.ID, r, work)
	}()
	return t.Clone(), nil
}

// traceparent returns the W3C traceparent of ctx's span, or "".
func traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// execute runs work's rounds for task id until the task ends.
func (m *Manager) execute(ctx context.Context, id string, r *run, work Work) {
	status := StatusWorking
	defer func() {
		m.mu.Lock()
		delete(m.runs, id)
		m.mu.Unlock()
		m.obs.Live(r.server, status, -1)
		r.cancel(nil)
	}()
	var in Input
	answered := map[string]bool{}
	for {
		out := safeRound(ctx, work, in, m.logger, r.tool)
		if ctx.Err() != nil {
			m.finishAfterStop(ctx, id, r)
			return
		}
		if out.Err == nil && out.InputRequests == nil {
			m.finish(ctx, id, r, StatusCompleted, out.Result, nil, "")
			return
		}
		if out.Err != nil {
			data, _ := json.Marshal(out.Err)
			m.finish(ctx, id, r, StatusFailed, nil, data, out.Err.Message)
			return
		}
		for k := range out.InputRequests {
			if answered[k] {
				m.logger.Error("task work asked again for input it already had", "tool", r.tool, "key", k)
				data, _ := json.Marshal(Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: the tool asked twice for the same input."})
				m.finish(ctx, id, r, StatusFailed, nil, data, "")
				return
			}
		}
		// Park the task for input, then wait until every request is
		// answered. The requests must reach the store, or the client
		// would see the task working forever: retry through an outage.
		_, err := m.retryUpdate(ctx, id, r, "input requests", func(t *Task) error {
			if t.Status.Terminal() {
				return ErrUnchanged
			}
			t.Status = StatusInputRequired
			t.InputRequests = out.InputRequests
			t.InputResponses = nil
			t.Updated = m.now()
			return nil
		})
		if err != nil {
			m.finishAfterStop(ctx, id, r)
			return
		}
		m.obs.Live(r.server, StatusWorking, -1)
		m.obs.Live(r.server, StatusInputRequired, 1)
		status = StatusInputRequired
		responses, ok := m.awaitInput(ctx, id, r)
		if !ok {
			m.finishAfterStop(ctx, id, r)
			return
		}
		m.obs.Live(r.server, StatusInputRequired, -1)
		m.obs.Live(r.server, StatusWorking, 1)
		status = StatusWorking
		for k := range responses {
			answered[k] = true
		}
		in = Input{Responses: responses, State: out.State}
	}
}

// safeRound runs one round, turning a panic into an internal error.
func safeRound(ctx context.Context, work Work, in Input, logger *slog.Logger, tool string) (out Outcome) {
	defer func() {
		if p := recover(); p != nil {
			logger.ErrorContext(ctx, "task work panicked", "tool", tool, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			out = Outcome{Err: &Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: the tool failed. This is a bug in the server, not in your request."}}
		}
	}()
	return work(ctx, in)
}

// awaitInput waits until the client has answered every outstanding input
// request of task id (tasks/update then sets it working), and takes the
// responses. It reports false if the task ended or ctx did.
func (m *Manager) awaitInput(ctx context.Context, id string, r *run) (map[string]json.RawMessage, bool) {
	tick := time.NewTicker(m.opts.PollInterval)
	defer tick.Stop()
	for {
		var responses map[string]json.RawMessage
		t, err := m.store.Update(ctx, id, func(t *Task) error {
			if t.Status != StatusWorking || len(t.InputResponses) == 0 {
				return ErrUnchanged
			}
			responses = t.InputResponses
			t.InputResponses = nil
			t.Updated = m.now()
			return nil
		})
		if m.storeErr("update", err) == nil {
			if t.Status.Terminal() {
				return nil, false
			}
			if responses != nil {
				return responses, true
			}
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-r.wake:
		case <-tick.C:
		}
	}
}

// finish records the end of task id, unless it has already ended (it was
// cancelled, or another replica gave up on it).
func (m *Manager) finish(ctx context.Context, id string, r *run, status Status, result, errObj json.RawMessage, msg string) {
	// The result must not be lost to a store outage: it is retried for as
	// long as it would be kept. The task stays this replica's meanwhile
	// (no sweep fails it), and once the store is back the renewals
	// restore its lease.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.Retention)
	defer cancel()
	final := status
	t, err := m.retryUpdate(rctx, id, r, "the end of a task", func(t *Task) error {
		if t.Status.Terminal() {
			return ErrUnchanged
		}
		now := m.now()
		t.Status, t.Result, t.Error, t.StatusMessage = status, result, errObj, msg
		t.InputRequests, t.InputResponses = nil, nil
		t.Updated, t.Expires, t.Lease = now, now.Add(m.opts.Retention), time.Time{}
		return nil
	})
	if err == nil {
		final = t.Status
	} else {
		m.logger.Error("task: could not record the end of a task", "tool", r.tool, "status", status, "error", err)
	}
	m.obs.Finished(r.server, r.tool, final, m.now().Sub(r.started))
}

// retryUpdate is store.Update retried, backing off to every 5s, while the
// store is unreachable, until ctx ends or the server stops; what names the
// change in the log.
func (m *Manager) retryUpdate(ctx context.Context, id string, r *run, what string, fn func(*Task) error) (*Task, error) {
	for attempt := 0; ; attempt++ {
		t, err := m.store.Update(ctx, id, fn)
		if m.storeErr("update", err) == nil || errors.Is(err, ErrNotFound) {
			return t, err
		}
		if attempt == 0 {
			m.logger.Warn("task: the store is unreachable; retrying to record "+what, "tool", r.tool, "error", err)
		}
		select {
		case <-time.After(min(time.Duration(attempt+1)*200*time.Millisecond, 5*time.Second)):
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-m.halt:
			return nil, ErrStopped
		}
	}
}

// finishAfterStop records the end of a task whose context ended: it was
// cancelled (already recorded), outlived its TTL, or the server stopped.
func (m *Manager) finishAfterStop(ctx context.Context, id string, r *run) {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errCancelled):
		m.obs.Finished(r.server, r.tool, StatusCancelled, m.now().Sub(r.started))
	case errors.Is(cause, context.DeadlineExceeded):
		data, _ := json.Marshal(Error{Code: jsonrpc.CodeInternalError, Message: "The task ran out of time: it outlived its time to live (tasks.ttl)."})
		m.finish(ctx, id, r, StatusFailed, nil, data, "The task ran out of time.")
	default:
		data, _ := json.Marshal(Error{Code: jsonrpc.CodeInternalError, Message: "The server stopped before the task finished."})
		m.finish(ctx, id, r, StatusFailed, nil, data, "The server stopped before the task finished.")
	}
}
