package tasks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of [Options].
const (
	DefaultTTL             = time.Hour
	DefaultRetention       = time.Hour
	DefaultPollInterval    = time.Second
	DefaultLease           = 30 * time.Second
	DefaultMaxPerPrincipal = 100
	DefaultMaxTotal        = 10000
)

// Options configures a [Manager]. It is the `tasks:` section of the
// configuration file. Zero fields take the defaults.
type Options struct {
	// Store is where tasks live: "memory" (this replica only) or "redis"
	// (shared by every replica; needs the redis section: one server,
	// Sentinel or Cluster). Empty means redis when Redis is configured,
	// else memory.
	Store string `yaml:"store" schema:"enum=memory|redis"`
	// TTL bounds how long a task may run, from its creation; a task still
	// live then is failed (its work is stopped a tenth of the TTL, at most
	// 5s, early, so that the failure is recorded before the store may
	// forget the task). Zero means one hour.
	TTL time.Duration `yaml:"ttl"`
	// Retention is how long a finished task (its result or error) is kept
	// for tasks/get. Zero means one hour.
	Retention time.Duration `yaml:"retention"`
	// PollInterval is the pollIntervalMs suggested to clients. Zero means 1s.
	PollInterval time.Duration `yaml:"poll_interval"`
	// Lease is how long a replica's claim on the tasks it runs lasts
	// without renewal; it renews every third of it. A live task whose
	// replica stopped renewing is marked failed within 1.5 leases. Zero
	// means 30s.
	Lease time.Duration `yaml:"lease"`
	// MaxPerPrincipal and MaxTotal cap the live tasks of one caller and of
	// the whole store. Zero means 100 and 10000; negative means no cap.
	MaxPerPrincipal int `yaml:"max_per_principal"`
	MaxTotal        int `yaml:"max_total"`
	// Tools marks tools (a server's own or an upstream's, by the name
	// clients call) whose calls run as tasks, overriding what the tool
	// declares.
	Tools []ToolOption `yaml:"tools"`
}

// ToolOption marks one tool's calls as tasks.
type ToolOption struct {
	Name    string  `yaml:"name"`
	Support Support `yaml:"support" schema:"enum=optional|required"`
}

// Validate reports every problem at once, each starting with its key
// relative to the section.
func (o *Options) Validate() error {
	var errs []error
	switch o.Store {
	case "", "memory", "redis":
	default:
		errs = append(errs, fmt.Errorf("store: must be memory or redis, got %q", o.Store))
	}
	for key, d := range map[string]time.Duration{"ttl": o.TTL, "retention": o.Retention, "poll_interval": o.PollInterval, "lease": o.Lease} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %s", key, d))
		}
	}
	if o.Lease > 0 && o.Lease < 3*time.Second {
		errs = append(errs, fmt.Errorf("lease: must be at least 3s (renewed every third), got %s", o.Lease))
	}
	seen := map[string]bool{}
	for i, t := range o.Tools {
		switch {
		case t.Name == "":
			errs = append(errs, fmt.Errorf("tools[%d].name: required", i))
		case seen[t.Name]:
			errs = append(errs, fmt.Errorf("tools[%d].name: %q is listed twice", i, t.Name))
		}
		seen[t.Name] = true
		if t.Support != SupportOptional && t.Support != SupportRequired {
			errs = append(errs, fmt.Errorf("tools[%d].support: must be optional or required, got %q", i, t.Support))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

func (o *Options) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&o.TTL, DefaultTTL)
	set(&o.Retention, DefaultRetention)
	set(&o.PollInterval, DefaultPollInterval)
	set(&o.Lease, DefaultLease)
	if o.MaxPerPrincipal == 0 {
		o.MaxPerPrincipal = DefaultMaxPerPrincipal
	}
	if o.MaxTotal == 0 {
		o.MaxTotal = DefaultMaxTotal
	}
}

// Input is what one round of a task's work gets: the client's responses
// to the input requests of the previous round, and the state that round
// left. Both are empty in the first round.
type Input struct {
	Responses map[string]json.RawMessage
	State     string
}

// Outcome is how one round of a task's work ended: with a result, with
// requests for client input (and state for the next round), or with a
// JSON-RPC error. A round that returns Result with Err nil completes the
// task, even if the result is a tool error (isError).
type Outcome struct {
	Result        json.RawMessage
	InputRequests map[string]json.RawMessage
	State         string
	Err           *Error
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Work runs one round of a task. It is called again, with the client's
// responses, after a round that asked for input. ctx ends when the task is
// cancelled or outlives its TTL.
type Work func(ctx context.Context, in Input) Outcome

// ttlMargin bounds how long before a live task's Expires its work is
// stopped, leaving time to record its failure before the store may forget
// the task.
const ttlMargin = 5 * time.Second

// ErrStopped is returned by Start once the manager is shutting down.
var ErrStopped = errors.New("tasks: the server is shutting down")

// Manager creates, runs and answers for tasks.
type Manager struct {
	store  Store
	opts   Options
	obs    Observer
	logger *slog.Logger
	now    func() time.Time
	worker string

	storeUp atomic.Bool
	// halt is closed when Shutdown's grace ends: retries stop.
	halt     chan struct{}
	haltOnce sync.Once
	// lastStoreFailure is when a store operation last failed (unix ns):
	// after an outage no replica could renew its leases, so none is
	// judged lost until a lease has passed since.
	lastStoreFailure atomic.Int64

	mu      sync.Mutex
	runs    map[string]*run
	stopped bool // Shutdown began: no new tasks
	forced  bool // Shutdown's context ended: stop every task
	wg      sync.WaitGroup
}

// run is a task this replica runs.
type run struct {
	server  string
	tool    string
	started time.Time
	cancel  context.CancelCauseFunc
	wake    chan struct{}
}

// errCancelled is the cause of a task context ended by tasks/cancel (or
// by any replica making the task terminal).
var errCancelled = errors.New("task cancelled")

// Deps are what a [Manager] needs besides its [Options]. Every field may
// be left zero.
type Deps struct {
	// Store holds the tasks. Nil means a [MemoryStore]: this process's
	// tasks only.
	Store Store
	// Observer is told what happens to tasks (metrics). Nil means none.
	Observer Observer
	// Logger receives what the manager notices. Nil discards.
	Logger *slog.Logger
	// Now reads the clock. Nil means time.Now.
	Now func() time.Time
}

// NewManager returns a manager of the tasks in deps.Store.
func NewManager(opts Options, deps Deps) *Manager {
	store, obs, logger, now := deps.Store, deps.Observer, deps.Logger, deps.Now
	if store == nil {
		store = NewMemoryStore(now)
	}
	opts.defaults()
	if obs == nil {
		obs = NopObserver{}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	host, _ := os.Hostname()
	m := &Manager{
		store: store, opts: opts, obs: obs, logger: logger, now: now,
		worker: host + "/" + newID()[:8],
		runs:   map[string]*run{},
		halt:   make(chan struct{}),
	}
	m.storeUp.Store(true)
	return m
}

// StoreUp reports whether the last store operation succeeded.
func (m *Manager) StoreUp() bool { return m.storeUp.Load() }

// OldestLive returns the age of the oldest live task this replica runs, or
// zero.
func (m *Manager) OldestLive() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var oldest time.Time
	for _, r := range m.runs {
		if oldest.IsZero() || r.started.Before(oldest) {
			oldest = r.started
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return m.now().Sub(oldest)
}

// storeErr records the outcome of a store operation.
func (m *Manager) storeErr(op string, err error) error {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrOwnerCap) || errors.Is(err, ErrTotalCap) {
		if !m.storeUp.Swap(true) {
			m.logger.Info("task store reachable again", "op", op)
		}
		return err
	}
	m.lastStoreFailure.Store(m.now().UnixNano())
	if m.storeUp.Swap(false) {
		m.logger.Warn("task store unreachable", "op", op, "error", err)
	}
	if op != "ping" {
		m.obs.StoreError(op)
	}
	return err
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

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

// Get returns owner's task id. Another caller's task is ErrNotFound, as a
// task that does not exist.
func (m *Manager) Get(ctx context.Context, owner, id string) (*Task, error) {
	t, err := m.store.Get(ctx, id)
	if m.storeErr("get", err) != nil {
		return nil, err
	}
	if t.Owner != owner {
		return nil, ErrNotFound
	}
	return t, nil
}

// Respond delivers the client's responses to owner's task id. Responses to
// keys that are not outstanding are ignored; once every outstanding
// request is answered the task is working again and its work resumes.
func (m *Manager) Respond(ctx context.Context, owner, id string, responses map[string]json.RawMessage) error {
	_, err := m.store.Update(ctx, id, func(t *Task) error {
		if t.Owner != owner {
			return ErrNotFound
		}
		if t.Status != StatusInputRequired {
			return ErrUnchanged
		}
		changed := false
		for k, v := range responses {
			if _, ok := t.InputRequests[k]; !ok {
				continue
			}
			delete(t.InputRequests, k)
			if t.InputResponses == nil {
				t.InputResponses = map[string]json.RawMessage{}
			}
			t.InputResponses[k] = v
			t.Answered = append(t.Answered, k)
			changed = true
		}
		if !changed {
			return ErrUnchanged
		}
		if len(t.InputRequests) == 0 {
			t.Status, t.InputRequests = StatusWorking, nil
		}
		t.Updated = m.now()
		return nil
	})
	if m.storeErr("update", err) != nil {
		return err
	}
	m.wakeLocal(id, false)
	return nil
}

// Cancel cancels owner's task id: a live task becomes cancelled at once
// and its work's context ends; a task already ended is left as it is.
func (m *Manager) Cancel(ctx context.Context, owner, id string) error {
	_, err := m.store.Update(ctx, id, func(t *Task) error {
		if t.Owner != owner {
			return ErrNotFound
		}
		if t.Status.Terminal() {
			return ErrUnchanged
		}
		now := m.now()
		t.Status, t.StatusMessage = StatusCancelled, "Cancelled by the client."
		t.InputRequests, t.InputResponses = nil, nil
		t.Updated, t.Expires, t.Lease = now, now.Add(m.opts.Retention), time.Time{}
		return nil
	})
	if m.storeErr("update", err) != nil {
		return err
	}
	m.wakeLocal(id, true)
	return nil
}

// wakeLocal tells the run of task id on this replica, if any, to look at
// the task again; stop ends its context as cancelled.
func (m *Manager) wakeLocal(id string, stop bool) {
	m.mu.Lock()
	r := m.runs[id]
	m.mu.Unlock()
	if r == nil {
		return
	}
	if stop {
		r.cancel(errCancelled)
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

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
