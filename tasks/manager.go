package tasks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

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
