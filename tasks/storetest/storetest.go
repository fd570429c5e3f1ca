// Package storetest checks that a [tasks.Store] keeps the contract the
// manager relies on. Every store runs it.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/tasks"
)

// Run runs the contract against stores made by newStore; each subtest gets
// a new, empty store. The stores must run on the real clock (tasks expire
// by it).
func Run(t *testing.T, newStore func(t *testing.T) tasks.Store) {
	ctx := context.Background()
	base := time.Now().Truncate(time.Millisecond)
	task := func(id, owner string) *tasks.Task {
		return &tasks.Task{
			ID: id, Owner: owner, Tool: "slow", Status: tasks.StatusWorking,
			Created: base, Updated: base, Expires: base.Add(time.Hour),
			PollInterval: time.Second, Worker: "w1", Lease: base.Add(time.Minute),
		}
	}

	t.Run("create then get from the same store", func(t *testing.T) {
		s := newStore(t)
		in := task("t1", "alice")
		in.InputRequests = map[string]json.RawMessage{"k": json.RawMessage(`{"method":"elicitation/create"}`)}
		if err := s.Create(ctx, in, tasks.Caps{}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "t1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Owner != "alice" || got.Status != tasks.StatusWorking || !got.Created.Equal(base) ||
			string(got.InputRequests["k"]) != `{"method":"elicitation/create"}` || got.PollInterval != time.Second {
			t.Fatalf("got %+v", got)
		}
		got.Status = tasks.StatusFailed // a copy: the store is unchanged
		again, _ := s.Get(ctx, "t1")
		if again.Status != tasks.StatusWorking {
			t.Fatal("Get returned the stored task, not a copy")
		}
	})

	t.Run("unknown id", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Get(ctx, "nope"); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("Get: %v, want ErrNotFound", err)
		}
		if _, err := s.Update(ctx, "nope", func(*tasks.Task) error { return nil }); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("Update: %v, want ErrNotFound", err)
		}
	})

	t.Run("duplicate id refused", func(t *testing.T) {
		s := newStore(t)
		if err := s.Create(ctx, task("t1", "a"), tasks.Caps{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, task("t1", "b"), tasks.Caps{}); err == nil {
			t.Fatal("second Create with the same id succeeded")
		}
	})

	t.Run("caps count live tasks per owner and in total", func(t *testing.T) {
		s := newStore(t)
		caps := tasks.Caps{PerOwner: 2, Total: 3}
		for _, id := range []string{"a1", "a2"} {
			if err := s.Create(ctx, task(id, "alice"), caps); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Create(ctx, task("a3", "alice"), caps); !errors.Is(err, tasks.ErrOwnerCap) {
			t.Fatalf("third task of alice: %v, want ErrOwnerCap", err)
		}
		if err := s.Create(ctx, task("b1", "bob"), caps); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, task("c1", "carol"), caps); !errors.Is(err, tasks.ErrTotalCap) {
			t.Fatalf("fourth task: %v, want ErrTotalCap", err)
		}
		// A task that ends frees its place.
		if _, err := s.Update(ctx, "a1", func(t *tasks.Task) error { t.Status = tasks.StatusCompleted; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, task("a3", "alice"), caps); err != nil {
			t.Fatalf("after a1 ended: %v", err)
		}
		// Ending twice does not free two places.
		if _, err := s.Update(ctx, "a1", func(t *tasks.Task) error { t.StatusMessage = "again"; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, task("c1", "carol"), caps); !errors.Is(err, tasks.ErrTotalCap) {
			t.Fatalf("after a second write of a terminal task: %v, want ErrTotalCap", err)
		}
	})

	t.Run("update applies, unchanged leaves, errors abort", func(t *testing.T) {
		s := newStore(t)
		if err := s.Create(ctx, task("t1", "alice"), tasks.Caps{}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Update(ctx, "t1", func(t *tasks.Task) error {
			t.Status = tasks.StatusInputRequired
			t.InputRequests = map[string]json.RawMessage{"q": json.RawMessage(`{}`)}
			t.Owner = "mallory" // the owner never changes
			return nil
		})
		if err != nil || got.Status != tasks.StatusInputRequired || got.Owner != "alice" {
			t.Fatalf("Update = %+v, %v", got, err)
		}
		got, err = s.Update(ctx, "t1", func(t *tasks.Task) error { t.Status = tasks.StatusFailed; return tasks.ErrUnchanged })
		if err != nil || got.Status != tasks.StatusInputRequired {
			t.Fatalf("unchanged Update = %+v, %v", got, err)
		}
		boom := errors.New("boom")
		if _, err := s.Update(ctx, "t1", func(t *tasks.Task) error { t.Status = tasks.StatusFailed; return boom }); !errors.Is(err, boom) {
			t.Fatalf("failing Update: %v", err)
		}
		got, _ = s.Get(ctx, "t1")
		if got.Status != tasks.StatusInputRequired || got.Owner != "alice" {
			t.Fatalf("after aborted updates: %+v", got)
		}
	})

	t.Run("concurrent updates are not lost", func(t *testing.T) {
		s := newStore(t)
		if err := s.Create(ctx, task("t1", "alice"), tasks.Caps{}); err != nil {
			t.Fatal(err)
		}
		const n = 20
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.Update(ctx, "t1", func(t *tasks.Task) error {
					t.Answered = append(t.Answered, fmt.Sprint(i))
					return nil
				})
				if err != nil {
					t.Error(err) // not Fatal: this is not the test's goroutine
				}
			}()
		}
		wg.Wait()
		got, _ := s.Get(ctx, "t1")
		if len(got.Answered) != n {
			t.Fatalf("%d of %d concurrent updates kept", len(got.Answered), n)
		}
	})

	t.Run("stale lists live tasks past their lease", func(t *testing.T) {
		s := newStore(t)
		old := task("old", "alice")
		old.Lease = base.Add(-time.Second)
		done := task("done", "alice")
		done.Lease = base.Add(-time.Second)
		done.Status = tasks.StatusCompleted
		for _, tk := range []*tasks.Task{task("fresh", "alice"), old, done} {
			if err := s.Create(ctx, tk, tasks.Caps{}); err != nil {
				t.Fatal(err)
			}
		}
		ids, err := s.Stale(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 1 || ids[0] != "old" {
			t.Fatalf("Stale = %v, want [old]", ids)
		}
		// Renewing the lease takes it off the list.
		if _, err := s.Update(ctx, "old", func(t *tasks.Task) error { t.Lease = base.Add(time.Minute); return nil }); err != nil {
			t.Fatal(err)
		}
		if ids, _ := s.Stale(ctx, base); len(ids) != 0 {
			t.Fatalf("Stale after renewal = %v", ids)
		}
	})

	t.Run("expired tasks are forgotten", func(t *testing.T) {
		s := newStore(t)
		tk := task("short", "alice")
		tk.Status = tasks.StatusCompleted
		tk.Expires = time.Now().Add(300 * time.Millisecond)
		if err := s.Create(ctx, tk, tasks.Caps{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "short"); err != nil {
			t.Fatalf("before expiry: %v", err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, err := s.Get(ctx, "short")
			if errors.Is(err, tasks.ErrNotFound) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("task not forgotten 5s after it expired: %v", err)
			}
			time.Sleep(50 * time.Millisecond) // waiting on the store's clock
		}
	})

	t.Run("subscribers hear of updates", func(t *testing.T) {
		s := newStore(t)
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ch, err := s.Subscribe(sctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, task("t1", "alice"), tasks.Caps{}); err != nil {
			t.Fatal(err)
		}
		// A subscription may take a moment to be live; update until heard.
		deadline := time.After(5 * time.Second)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if _, err := s.Update(ctx, "t1", func(t *tasks.Task) error { t.StatusMessage = "x"; return nil }); err != nil {
				t.Fatal(err)
			}
			select {
			case id := <-ch:
				if id != "t1" {
					t.Fatalf("heard %q, want t1", id)
				}
				return
			case <-tick.C:
			case <-deadline:
				t.Fatal("no change heard in 5s")
			}
		}
	})
}
