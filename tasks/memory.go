package tasks

import (
	"context"
	"errors"
	"sync"
	"time"
)

// MemoryStore keeps tasks in this process: the store for one replica, and
// for tests. Its tasks end with the process.
type MemoryStore struct {
	now func() time.Time

	mu    sync.Mutex
	tasks map[string]*Task
	live  map[string]map[string]bool // owner → live task IDs
	total int
	subs  map[chan string]struct{}
}

// NewMemoryStore returns an empty store. now nil means time.Now.
func NewMemoryStore(now func() time.Time) *MemoryStore {
	if now == nil {
		now = time.Now
	}
	return &MemoryStore{
		now:   now,
		tasks: map[string]*Task{},
		live:  map[string]map[string]bool{},
		subs:  map[chan string]struct{}{},
	}
}

// get returns the stored task, forgetting it if it has expired. s.mu is held.
func (s *MemoryStore) get(id string) *Task {
	t := s.tasks[id]
	if t != nil && !s.now().Before(t.Expires) {
		s.release(t)
		delete(s.tasks, id)
		return nil
	}
	return t
}

// release stops t counting against the caps. s.mu is held.
func (s *MemoryStore) release(t *Task) {
	if ids := s.live[t.Owner]; ids[t.ID] {
		delete(ids, t.ID)
		s.total--
		if len(ids) == 0 {
			delete(s.live, t.Owner)
		}
	}
}

// Create implements [Store].
func (s *MemoryStore) Create(_ context.Context, t *Task, caps Caps) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.get(t.ID) != nil {
		return errors.New("tasks: task id already in use")
	}
	if caps.PerOwner > 0 && len(s.live[t.Owner]) >= caps.PerOwner {
		return ErrOwnerCap
	}
	if caps.Total > 0 && s.total >= caps.Total {
		return ErrTotalCap
	}
	s.tasks[t.ID] = t.Clone()
	if !t.Status.Terminal() {
		if s.live[t.Owner] == nil {
			s.live[t.Owner] = map[string]bool{}
		}
		s.live[t.Owner][t.ID] = true
		s.total++
	}
	return nil
}

// Get implements [Store].
func (s *MemoryStore) Get(_ context.Context, id string) (*Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.get(id)
	if t == nil {
		return nil, ErrNotFound
	}
	return t.Clone(), nil
}

// Update implements [Store].
func (s *MemoryStore) Update(_ context.Context, id string, fn func(*Task) error) (*Task, error) {
	s.mu.Lock()
	t := s.get(id)
	if t == nil {
		s.mu.Unlock()
		return nil, ErrNotFound
	}
	c := t.Clone()
	if err := fn(c); err != nil {
		s.mu.Unlock()
		if errors.Is(err, ErrUnchanged) {
			return t.Clone(), nil
		}
		return nil, err
	}
	c.ID, c.Owner = t.ID, t.Owner
	s.tasks[id] = c
	if c.Status.Terminal() {
		s.release(c)
	}
	out := c.Clone()
	subs := make([]chan string, 0, len(s.subs))
	for ch := range s.subs {
		subs = append(subs, ch)
	}
	s.mu.Unlock()
	for _, ch := range subs {
		select {
		case ch <- id:
		default: // a slow reader polls
		}
	}
	return out, nil
}

// Stale implements [Store]. It also forgets every task past its Expires:
// get forgets only the tasks it is asked for, and the manager calls Stale
// every half lease.
func (s *MemoryStore) Stale(_ context.Context, now time.Time) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.tasks {
		s.get(id)
	}
	var ids []string
	for _, owned := range s.live {
		for id := range owned {
			if t := s.tasks[id]; t != nil && t.Lease.Before(now) {
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
}

// Subscribe implements [Store].
func (s *MemoryStore) Subscribe(ctx context.Context) (<-chan string, error) {
	ch := make(chan string, 64)
	s.mu.Lock()
	s.subs[ch] = struct{}{}
	s.mu.Unlock()
	go func() {
		<-ctx.Done()
		s.mu.Lock()
		delete(s.subs, ch)
		s.mu.Unlock()
	}()
	return ch, nil
}

// Ping implements [Store]: memory is always there.
func (s *MemoryStore) Ping(context.Context) error { return nil }

// Close implements [Store].
func (s *MemoryStore) Close() error { return nil }
