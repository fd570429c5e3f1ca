package tasks

import (
	"context"
	"time"
)

// Store keeps tasks where every replica that serves them can reach them.
// Every method is safe for concurrent use. A store forgets a task at its
// Expires.
type Store interface {
	// Create saves a new task, once it can be read back by Get from any
	// replica, unless its owner already has caps.PerOwner live tasks
	// (ErrOwnerCap) or the store caps.Total (ErrTotalCap); zero means no
	// cap.
	Create(ctx context.Context, t *Task, caps Caps) error
	// Get returns a copy of the task, or ErrNotFound.
	Get(ctx context.Context, id string) (*Task, error)
	// Update calls fn on a copy of the task and saves what fn leaves, unless
	// fn returns an error (ErrUnchanged leaves the task and is not
	// reported). If another writer saved the task in between, Update calls
	// fn again on the new state. A task that becomes terminal stops
	// counting against the caps. Update returns the task as saved (or as
	// found, if unchanged), and announces the change to Subscribe.
	Update(ctx context.Context, id string, fn func(*Task) error) (*Task, error)
	// Stale returns the IDs of live tasks whose lease ended before now.
	Stale(ctx context.Context, now time.Time) ([]string, error)
	// Subscribe returns the IDs of tasks changed by any replica, as they
	// change, until ctx is done. Delivery is best effort (an ID may be
	// dropped while the store is unreachable); readers poll as well.
	Subscribe(ctx context.Context) (<-chan string, error)
	// Ping reports whether the store can be reached.
	Ping(ctx context.Context) error
	// Close releases the store's connections.
	Close() error
}

// Caps bounds the live (working or input_required) tasks.
type Caps struct {
	PerOwner int
	Total    int
}
