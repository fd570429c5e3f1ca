package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The tests here run in synctest bubbles: the lease, poll, TTL and
// shutdown timers run on the bubble's fake clock, and synctest.Wait lets
// every goroutine of the manager settle before the test looks.

// recorder is an Observer that remembers what it heard, in order.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

// on names a tool of server: the tool alone on the root server, else
// server/tool.
func on(server, tool string) string {
	if server == "" {
		return tool
	}
	return server + "/" + tool
}

func (r *recorder) Created(server, tool string) { r.add("created %s", on(server, tool)) }
func (r *recorder) Refused(server, tool, reason string) {
	r.add("refused %s %s", on(server, tool), reason)
}
func (r *recorder) Live(server string, s Status, delta int) {
	r.add("live %s %+d", on(server, string(s)), delta)
}
func (r *recorder) Lost(server, tool string) { r.add("lost %s", on(server, tool)) }
func (r *recorder) StoreError(op string)     { r.add("store_error %s", op) }
func (r *recorder) Finished(server, tool string, s Status, _ time.Duration) {
	r.add("finished %s %s", on(server, tool), s)
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// testOptions are short timers, so that a test's fake clock moves little.
var testOptions = Options{TTL: time.Hour, Retention: 10 * time.Minute, PollInterval: time.Second, Lease: 30 * time.Second}

// newTestManager returns a manager over a new memory store, with a
// recording observer. Call it inside a bubble.
func newTestManager(t *testing.T, opts Options) (*Manager, *recorder, *MemoryStore) {
	t.Helper()
	store := NewMemoryStore(nil)
	obs := &recorder{}
	return NewManager(opts, Deps{Store: store, Observer: obs}), obs, store
}

// runManager runs m.Run until the test ends (the cleanup runs inside the
// bubble, so the bubble's goroutines all exit). It returns a stop func to
// end it earlier.
func runManager(t *testing.T, m *Manager) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// shutdownAtEnd stops m's running tasks when the test ends, so that no
// goroutine outlives the bubble.
func shutdownAtEnd(t *testing.T, m *Manager) {
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		m.Shutdown(ctx)
	})
}

// blockUntilDone is work that runs until its context ends, reporting the
// cause on causes.
func blockUntilDone(causes chan<- error) Work {
	return func(ctx context.Context, _ Input) Outcome {
		<-ctx.Done()
		if causes != nil {
			causes <- context.Cause(ctx)
		}
		return Outcome{Result: json.RawMessage(`{"content":[]}`)}
	}
}

func mustGet(t *testing.T, m *Manager, owner, id string) *Task {
	t.Helper()
	got, err := m.Get(context.Background(), owner, id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return got
}

// errorOf decodes a failed task's error object.
func errorOf(t *testing.T, task *Task) Error {
	t.Helper()
	var e Error
	if err := json.Unmarshal(task.Error, &e); err != nil {
		t.Fatalf("task error %q: %v", task.Error, err)
	}
	return e
}

func TestTaskEnds(t *testing.T) {
	tests := []struct {
		name       string
		work       Work
		wantStatus Status
		wantResult string
		wantCode   int64
		wantMsg    string
	}{
		{
			name: "completes with the result",
			work: func(context.Context, Input) Outcome {
				time.Sleep(3 * time.Second)
				return Outcome{Result: json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)}
			},
			wantStatus: StatusCompleted,
			wantResult: `{"content":[{"type":"text","text":"done"}]}`,
		},
		{
			name: "a tool error still completes",
			work: func(context.Context, Input) Outcome {
				time.Sleep(3 * time.Second)
				return Outcome{Result: json.RawMessage(`{"content":[],"isError":true}`)}
			},
			wantStatus: StatusCompleted,
			wantResult: `{"content":[],"isError":true}`,
		},
		{
			name: "an error fails with the error object",
			work: func(context.Context, Input) Outcome {
				time.Sleep(3 * time.Second)
				return Outcome{Err: &Error{Code: -32000, Message: "the job broke", Data: json.RawMessage(`{"why":"fixture"}`)}}
			},
			wantStatus: StatusFailed,
			wantCode:   -32000,
			wantMsg:    "the job broke",
		},
		{
			name: "a panic fails with an internal error",
			work: func(context.Context, Input) Outcome {
				time.Sleep(3 * time.Second)
				panic("boom")
			},
			wantStatus: StatusFailed,
			wantCode:   -32603,
			wantMsg:    "Internal error",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, obs, _ := newTestManager(t, testOptions)
				start := time.Now()
				task, err := m.Start(context.Background(), "alice", "job", tt.work)
				if err != nil {
					t.Fatal(err)
				}
				if task.Status != StatusWorking || task.Owner != "alice" || task.Tool != "job" ||
					!task.Expires.Equal(start.Add(testOptions.TTL)) || task.PollInterval != testOptions.PollInterval {
					t.Fatalf("Start returned %+v", task)
				}
				if got := mustGet(t, m, "alice", task.ID); got.Status != StatusWorking {
					t.Fatalf("right after Start: status %s, want working", got.Status)
				}
				synctest.Wait()
				if got := mustGet(t, m, "alice", task.ID); got.Status != StatusWorking {
					t.Fatalf("while the work runs: status %s, want working", got.Status)
				}
				time.Sleep(3 * time.Second)
				synctest.Wait()
				end := time.Now()
				got := mustGet(t, m, "alice", task.ID)
				if got.Status != tt.wantStatus {
					t.Fatalf("status %s, want %s (%+v)", got.Status, tt.wantStatus, got)
				}
				if !got.Expires.Equal(end.Add(testOptions.Retention)) || !got.Updated.Equal(end) {
					t.Errorf("Expires %v, Updated %v; want the end (%v) plus the retention, and the end", got.Expires, got.Updated, end)
				}
				if string(got.Result) != tt.wantResult {
					t.Errorf("result %s, want %s", got.Result, tt.wantResult)
				}
				if tt.wantStatus == StatusFailed {
					e := errorOf(t, got)
					if e.Code != tt.wantCode || !strings.Contains(e.Message, tt.wantMsg) {
						t.Errorf("error %+v, want code %d and a message containing %q", e, tt.wantCode, tt.wantMsg)
					}
				} else if got.Error != nil {
					t.Errorf("error %s on a completed task", got.Error)
				}
				want := []string{"created job", "live working +1", "finished job " + string(tt.wantStatus), "live working -1"}
				if got := obs.list(); !slices.Equal(got, want) {
					t.Errorf("observer heard %q, want %q", got, want)
				}
				if m.OldestLive() != 0 {
					t.Errorf("OldestLive = %v after the task ended", m.OldestLive())
				}
			})
		})
	}
}

// TestInputRounds walks a task through two rounds of input.
func TestInputRounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, obs, _ := newTestManager(t, testOptions)
		shutdownAtEnd(t, m)
		ctx := context.Background()
		rounds := make(chan Input, 3)
		n := 0 // rounds run; only the work touches it
		reqs := map[string]json.RawMessage{
			"first":  json.RawMessage(`{"method":"elicitation/create","params":{"message":"First?"}}`),
			"second": json.RawMessage(`{"method":"elicitation/create","params":{"message":"Second?"}}`),
		}
		task, err := m.Start(ctx, "alice", "ask", func(_ context.Context, in Input) Outcome {
			rounds <- in
			n++
			switch n {
			case 1:
				return Outcome{InputRequests: reqs, State: "after-round-1"}
			case 2:
				// Asks for a key it was already given: a bug in the tool.
				return Outcome{InputRequests: map[string]json.RawMessage{"first": reqs["first"]}, State: "after-round-2"}
			}
			return Outcome{Result: json.RawMessage(`{}`)}
		})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if in := <-rounds; in.Responses != nil || in.State != "" {
			t.Fatalf("first round got %+v, want nothing", in)
		}
		got := mustGet(t, m, "alice", task.ID)
		if got.Status != StatusInputRequired || len(got.InputRequests) != 2 ||
			string(got.InputRequests["first"]) != string(reqs["first"]) || string(got.InputRequests["second"]) != string(reqs["second"]) {
			t.Fatalf("after round 1: %+v, want input_required with both requests", got)
		}

		first := json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`)
		if err := m.Respond(ctx, "alice", task.ID, map[string]json.RawMessage{"first": first}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		got = mustGet(t, m, "alice", task.ID)
		if got.Status != StatusInputRequired || len(got.InputRequests) != 1 || got.InputRequests["second"] == nil {
			t.Fatalf("after one response: %+v, want input_required asking only for second", got)
		}
		before := got

		// Another caller cannot answer it.
		if err := m.Respond(ctx, "mallory", task.ID, map[string]json.RawMessage{"second": json.RawMessage(`{"action":"accept"}`)}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Respond by another owner: %v, want ErrNotFound", err)
		}
		// A key never asked for, and a key already answered, change nothing.
		for _, resp := range []map[string]json.RawMessage{
			{"third": json.RawMessage(`{"action":"accept"}`)},
			{"first": json.RawMessage(`{"action":"decline"}`)},
		} {
			time.Sleep(time.Second)
			if err := m.Respond(ctx, "alice", task.ID, resp); err != nil {
				t.Fatalf("Respond(%v) = %v, want nil (ignored)", resp, err)
			}
			synctest.Wait()
			got = mustGet(t, m, "alice", task.ID)
			if got.Status != StatusInputRequired || !got.Updated.Equal(before.Updated) ||
				len(got.InputRequests) != 1 || string(got.InputResponses["first"]) != string(first) {
				t.Fatalf("after an ignored response %v: %+v, want %+v", resp, got, before)
			}
		}
		if len(rounds) != 0 {
			t.Fatal("the work ran again before every request was answered")
		}

		second := json.RawMessage(`{"action":"accept","content":{"name":"Grace"}}`)
		if err := m.Respond(ctx, "alice", task.ID, map[string]json.RawMessage{"second": second}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		in := <-rounds
		if in.State != "after-round-1" || len(in.Responses) != 2 ||
			string(in.Responses["first"]) != string(first) || string(in.Responses["second"]) != string(second) {
			t.Fatalf("second round got %+v, want both responses and the first round's state", in)
		}
		// The second round asked for "first" again: the task fails.
		got = mustGet(t, m, "alice", task.ID)
		if got.Status != StatusFailed || errorOf(t, got).Code != -32603 || !strings.Contains(errorOf(t, got).Message, "asked twice") {
			t.Fatalf("after asking twice: %+v, want failed with -32603", got)
		}
		want := []string{
			"created ask", "live working +1",
			"live working -1", "live input_required +1",
			"live input_required -1", "live working +1",
			"finished ask failed", "live working -1",
		}
		if got := obs.list(); !slices.Equal(got, want) {
			t.Errorf("observer heard %q, want %q", got, want)
		}
	})
}

// TestLiveCountsByServer: the live tasks of a virtual server are counted
// on that server, through each change of status.
func TestLiveCountsByServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, obs, _ := newTestManager(t, testOptions)
		shutdownAtEnd(t, m)
		ctx := WithServer(context.Background(), "team-a")
		asked := false
		task, err := m.Start(ctx, "alice", "ask", func(_ context.Context, in Input) Outcome {
			if !asked {
				asked = true
				return Outcome{InputRequests: map[string]json.RawMessage{"name": json.RawMessage(`{"method":"elicitation/create","params":{"message":"Name?"}}`)}}
			}
			return Outcome{Result: json.RawMessage(`{}`)}
		})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := m.Respond(ctx, "alice", task.ID, map[string]json.RawMessage{"name": json.RawMessage(`{"action":"accept"}`)}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		want := []string{
			"created team-a/ask", "live team-a/working +1",
			"live team-a/working -1", "live team-a/input_required +1",
			"live team-a/input_required -1", "live team-a/working +1",
			"finished team-a/ask completed", "live team-a/working -1",
		}
		if got := obs.list(); !slices.Equal(got, want) {
			t.Errorf("observer heard %q, want %q", got, want)
		}
	})
}

// TestCancel checks cancellation by the owner, of a task already ended,
// and by anyone else.
func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, obs, _ := newTestManager(t, testOptions)
		shutdownAtEnd(t, m)
		ctx := context.Background()
		causes := make(chan error, 1)
		task, err := m.Start(ctx, "alice", "slow", blockUntilDone(causes))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)

		// Nobody else can see, answer or cancel it.
		for name, call := range map[string]func() error{
			"Get": func() error { _, err := m.Get(ctx, "mallory", task.ID); return err },
			"Respond": func() error {
				return m.Respond(ctx, "mallory", task.ID, map[string]json.RawMessage{"x": json.RawMessage(`{}`)})
			},
			"Cancel":              func() error { return m.Cancel(ctx, "mallory", task.ID) },
			"Cancel without auth": func() error { return m.Cancel(ctx, "", task.ID) },
		} {
			if err := call(); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s by another owner: %v, want ErrNotFound", name, err)
			}
		}
		synctest.Wait()
		if got := mustGet(t, m, "alice", task.ID); got.Status != StatusWorking || !got.Updated.Equal(task.Updated) || len(causes) != 0 {
			t.Fatalf("after another owner's calls: %+v, want untouched", got)
		}

		if err := m.Cancel(ctx, "alice", task.ID); err != nil {
			t.Fatal(err)
		}
		// Cancelled at once, before the work has returned.
		cancelled := mustGet(t, m, "alice", task.ID)
		if cancelled.Status != StatusCancelled || !cancelled.Expires.Equal(time.Now().Add(testOptions.Retention)) {
			t.Fatalf("right after Cancel: %+v, want cancelled, kept for the retention", cancelled)
		}
		synctest.Wait()
		if cause := <-causes; !errors.Is(cause, errCancelled) {
			t.Errorf("work's context ended with cause %v, want %v", cause, errCancelled)
		}
		want := []string{"created slow", "live working +1", "finished slow cancelled", "live working -1"}
		if got := obs.list(); !slices.Equal(got, want) {
			t.Errorf("observer heard %q, want %q", got, want)
		}

		// Cancelling again, or by someone else, leaves it as it is.
		time.Sleep(time.Second)
		if err := m.Cancel(ctx, "alice", task.ID); err != nil {
			t.Errorf("Cancel of a cancelled task: %v, want nil", err)
		}
		if err := m.Cancel(ctx, "mallory", task.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Cancel of a cancelled task by another owner: %v, want ErrNotFound", err)
		}
		if got := mustGet(t, m, "alice", task.ID); got.Status != StatusCancelled || !got.Updated.Equal(cancelled.Updated) {
			t.Errorf("after a second Cancel: %+v, want unchanged %+v", got, cancelled)
		}
	})
}

func TestCancelCompletedTaskLeavesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _, _ := newTestManager(t, testOptions)
		ctx := context.Background()
		task, err := m.Start(ctx, "", "quick", func(context.Context, Input) Outcome {
			return Outcome{Result: json.RawMessage(`{"content":[]}`)}
		})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		done := mustGet(t, m, "", task.ID)
		time.Sleep(time.Second)
		if err := m.Cancel(ctx, "", task.ID); err != nil {
			t.Fatalf("Cancel of a completed task: %v", err)
		}
		if got := mustGet(t, m, "", task.ID); got.Status != StatusCompleted || string(got.Result) != string(done.Result) || !got.Updated.Equal(done.Updated) {
			t.Fatalf("after Cancel: %+v, want unchanged %+v", got, done)
		}
	})
}

func TestTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := testOptions
		opts.TTL = 10 * time.Minute
		m, obs, _ := newTestManager(t, opts)
		causes := make(chan error, 1)
		start := time.Now()
		task, err := m.Start(context.Background(), "alice", "slow", blockUntilDone(causes))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(opts.TTL)
		synctest.Wait()
		if cause := <-causes; !errors.Is(cause, context.DeadlineExceeded) {
			t.Errorf("work's context ended with %v, want the deadline", cause)
		}
		got := mustGet(t, m, "alice", task.ID)
		if got.Status != StatusFailed || !strings.Contains(errorOf(t, got).Message, "time to live") {
			t.Fatalf("after the TTL: %+v, want failed with the ttl message", got)
		}
		if got.Updated.After(start.Add(opts.TTL)) {
			t.Errorf("failed at %v, after the TTL ended at %v", got.Updated, start.Add(opts.TTL))
		}
		if l := obs.list(); !slices.Contains(l, "finished slow failed") {
			t.Errorf("observer heard %q, want a failed task", l)
		}
	})
}

func TestCaps(t *testing.T) {
	tests := []struct {
		name    string
		opts    func(*Options)
		owners  []string // owners of the tasks started first, all accepted
		owner   string   // owner of the one refused
		want    error
		wantObs string
	}{
		{name: "per principal", opts: func(o *Options) { o.MaxPerPrincipal = 2 }, owners: []string{"alice", "alice", "bob"}, owner: "alice", want: ErrOwnerCap, wantObs: "refused slow owner_cap"},
		{name: "total", opts: func(o *Options) { o.MaxTotal = 3 }, owners: []string{"alice", "bob", "carol"}, owner: "dave", want: ErrTotalCap, wantObs: "refused slow total_cap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := testOptions
				tt.opts(&opts)
				m, obs, _ := newTestManager(t, opts)
				shutdownAtEnd(t, m)
				ctx := context.Background()
				var first *Task
				for i, owner := range tt.owners {
					task, err := m.Start(ctx, owner, "slow", blockUntilDone(nil))
					if err != nil {
						t.Fatalf("task %d of %s: %v", i, owner, err)
					}
					if first == nil {
						first = task
					}
				}
				if _, err := m.Start(ctx, tt.owner, "slow", blockUntilDone(nil)); !errors.Is(err, tt.want) {
					t.Fatalf("over the cap: %v, want %v", err, tt.want)
				}
				if l := obs.list(); l[len(l)-1] != tt.wantObs {
					t.Errorf("observer heard %q last, want %q", l[len(l)-1], tt.wantObs)
				}
				// A task that ends frees its place.
				if err := m.Cancel(ctx, first.Owner, first.ID); err != nil {
					t.Fatal(err)
				}
				if _, err := m.Start(ctx, tt.owner, "slow", blockUntilDone(nil)); err != nil {
					t.Fatalf("after a task ended: %v", err)
				}
			})
		})
	}
}

// subscribeless is a store whose Subscribe fails: its manager learns of
// changes by polling only.
type subscribeless struct{ *MemoryStore }

func (subscribeless) Subscribe(context.Context) (<-chan string, error) {
	return nil, errors.New("no subscriptions here")
}

// TestLostWorker runs two replicas over one store: when the replica that
// runs a task stops renewing its lease, the other marks it failed within
// 1.5 leases, and counts it lost on the server it was started on.
func TestLostWorker(t *testing.T) {
	const lease = 30 * time.Second
	opts := testOptions
	opts.Lease = lease
	tests := []struct {
		name string
		// server is the server the task is started on.
		server string
		// stopA stops replica a's renewals, at the time it returns.
		stopA func(t *testing.T, a *Manager)
	}{
		{name: "never ran", stopA: func(*testing.T, *Manager) {}},
		{name: "stopped after renewing", server: "team-a", stopA: func(t *testing.T, a *Manager) {
			stop := runManager(t, a)
			time.Sleep(3*lease + lease/2) // several renewals
			stop()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := NewMemoryStore(nil)
				obsA, obsB := &recorder{}, &recorder{}
				a := NewManager(opts, Deps{Store: store, Observer: obsA})
				b := NewManager(opts, Deps{Store: store, Observer: obsB})
				shutdownAtEnd(t, a)
				task, err := a.Start(WithServer(context.Background(), tt.server), "alice", "slow", blockUntilDone(nil))
				if err != nil {
					t.Fatal(err)
				}
				runManager(t, b)
				tt.stopA(t, a)
				stopped := time.Now()
				for time.Since(stopped) < 3*lease {
					time.Sleep(time.Second)
					synctest.Wait()
					if got := mustGet(t, b, "alice", task.ID); got.Status != StatusWorking {
						break
					}
				}
				if d := time.Since(stopped); d > lease*3/2 {
					t.Errorf("failed %v after the worker stopped, want at most %v", d, lease*3/2)
				}
				got := mustGet(t, b, "alice", task.ID)
				if got.Status != StatusFailed || !strings.Contains(errorOf(t, got).Message, "stopped") || !strings.Contains(got.StatusMessage, "stopped") {
					t.Fatalf("task of the lost worker: %+v, want failed with the stopped message", got)
				}
				if l, want := obsB.list(), []string{"lost " + on(tt.server, "slow")}; !slices.Equal(l, want) {
					t.Errorf("replica b's observer heard %q, want %q", l, want)
				}
				if l := obsA.list(); len(l) == 0 || l[0] != "created "+on(tt.server, "slow") {
					t.Errorf("replica a's observer heard %q, want the task created on %q first", l, tt.server)
				}
			})
		})
	}
}

// TestRenewalKeepsTaskAlive runs a task for many leases on a replica that
// renews, with another replica sweeping.
func TestRenewalKeepsTaskAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := NewMemoryStore(nil)
		a := NewManager(testOptions, Deps{Store: store})
		obsB := &recorder{}
		b := NewManager(testOptions, Deps{Store: store, Observer: obsB})
		runManager(t, a)
		runManager(t, b)
		task, err := a.Start(context.Background(), "alice", "slow", func(context.Context, Input) Outcome {
			time.Sleep(20 * testOptions.Lease)
			return Outcome{Result: json.RawMessage(`{"content":[]}`)}
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20*testOptions.Lease - time.Second)
		synctest.Wait()
		got := mustGet(t, b, "alice", task.ID)
		if got.Status != StatusWorking || !got.Lease.After(time.Now()) {
			t.Fatalf("after %v: %+v, want working with a lease in the future", 20*testOptions.Lease, got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := mustGet(t, b, "alice", task.ID); got.Status != StatusCompleted {
			t.Fatalf("at the end of the work: %+v, want completed", got)
		}
		if l := obsB.list(); len(l) != 0 {
			t.Errorf("replica b's observer heard %q, want nothing", l)
		}
	})
}

// TestCancelThroughOtherReplica cancels a task through replica b while its
// work runs in replica a: a's work stops within a third of a lease, by
// subscription or, without one, by the renewal loop.
func TestCancelThroughOtherReplica(t *testing.T) {
	tests := []struct {
		name  string
		store func() Store
	}{
		{name: "subscription", store: func() Store { return NewMemoryStore(nil) }},
		{name: "renewal loop", store: func() Store { return subscribeless{NewMemoryStore(nil)} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := tt.store()
				obsA := &recorder{}
				a := NewManager(testOptions, Deps{Store: store, Observer: obsA})
				b := NewManager(testOptions, Deps{Store: store})
				shutdownAtEnd(t, a)
				runManager(t, a)
				runManager(t, b)
				ended := make(chan time.Time, 1)
				task, err := a.Start(context.Background(), "alice", "slow", func(ctx context.Context, _ Input) Outcome {
					<-ctx.Done()
					ended <- time.Now()
					return Outcome{}
				})
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(7 * time.Second) // off the renewal ticks
				cancelled := time.Now()
				if err := b.Cancel(context.Background(), "alice", task.ID); err != nil {
					t.Fatal(err)
				}
				var at time.Time
				select {
				case at = <-ended:
				case <-time.After(testOptions.Lease):
					t.Fatalf("a's work still runs %v after b cancelled its task", testOptions.Lease)
				}
				if d := at.Sub(cancelled); d > testOptions.Lease/3 {
					t.Errorf("a's work stopped %v after b cancelled, want at most %v", d, testOptions.Lease/3)
				}
				synctest.Wait()
				if got := mustGet(t, a, "alice", task.ID); got.Status != StatusCancelled {
					t.Errorf("task %+v, want cancelled", got)
				}
				if l := obsA.list(); !slices.Contains(l, "finished slow cancelled") {
					t.Errorf("replica a's observer heard %q, want the task finished cancelled", l)
				}
			})
		})
	}
}

func TestShutdown(t *testing.T) {
	t.Run("waits for running tasks", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m, _, _ := newTestManager(t, testOptions)
			task, err := m.Start(context.Background(), "alice", "slow", func(context.Context, Input) Outcome {
				time.Sleep(time.Minute)
				return Outcome{Result: json.RawMessage(`{"content":[]}`)}
			})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			m.Shutdown(ctx)
			if d := time.Since(start); d != time.Minute {
				t.Errorf("Shutdown returned after %v, want when the task ended (%v)", d, time.Minute)
			}
			if got := mustGet(t, m, "alice", task.ID); got.Status != StatusCompleted {
				t.Errorf("task %+v, want completed", got)
			}
			if _, err := m.Start(context.Background(), "alice", "slow", blockUntilDone(nil)); !errors.Is(err, ErrStopped) {
				t.Errorf("Start after Shutdown: %v, want ErrStopped", err)
			}
		})
	})
	t.Run("fails tasks still running when its context ends", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m, obs, _ := newTestManager(t, testOptions)
			causes := make(chan error, 1)
			task, err := m.Start(context.Background(), "alice", "slow", blockUntilDone(causes))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			m.Shutdown(ctx)
			if d := time.Since(start); d != 10*time.Second {
				t.Errorf("Shutdown returned after %v, want 10s", d)
			}
			if cause := <-causes; !errors.Is(cause, ErrStopped) {
				t.Errorf("work's context ended with %v, want ErrStopped", cause)
			}
			got := mustGet(t, m, "alice", task.ID)
			if got.Status != StatusFailed || !strings.Contains(got.StatusMessage, "server stopped") || !strings.Contains(errorOf(t, got).Message, "server stopped") {
				t.Errorf("task %+v, want failed: the server stopped", got)
			}
			if l := obs.list(); !slices.Contains(l, "finished slow failed") {
				t.Errorf("observer heard %q", l)
			}
		})
	})
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want []string // each a line of the error, by its key
	}{
		{name: "zero", opts: Options{}},
		{name: "all set", opts: Options{Store: "redis", TTL: time.Hour, Retention: time.Minute, PollInterval: time.Second, Lease: 3 * time.Second, MaxPerPrincipal: -1, MaxTotal: 5,
			Tools: []ToolOption{{Name: "a", Support: SupportOptional}, {Name: "b", Support: SupportRequired}}}},
		{name: "store", opts: Options{Store: "postgres"}, want: []string{"store:"}},
		{name: "ttl", opts: Options{TTL: -time.Second}, want: []string{"ttl:"}},
		{name: "retention", opts: Options{Retention: -time.Second}, want: []string{"retention:"}},
		{name: "poll_interval", opts: Options{PollInterval: -time.Second}, want: []string{"poll_interval:"}},
		{name: "negative lease", opts: Options{Lease: -time.Second}, want: []string{"lease: must not be negative"}},
		{name: "short lease", opts: Options{Lease: time.Second}, want: []string{"lease: must be at least 3s"}},
		{name: "tool without a name", opts: Options{Tools: []ToolOption{{Support: SupportOptional}}}, want: []string{"tools[0].name:"}},
		{name: "tool twice", opts: Options{Tools: []ToolOption{{Name: "a", Support: SupportOptional}, {Name: "a", Support: SupportRequired}}}, want: []string{"tools[1].name:"}},
		{name: "tool support", opts: Options{Tools: []ToolOption{{Name: "a", Support: "sometimes"}}}, want: []string{"tools[0].support:"}},
		{name: "tool support none", opts: Options{Tools: []ToolOption{{Name: "a"}}}, want: []string{"tools[0].support:"}},
		{
			name: "every problem at once",
			opts: Options{Store: "x", TTL: -1, Retention: -1, PollInterval: -1, Lease: -1, Tools: []ToolOption{{Support: "x"}}},
			want: []string{"lease:", "poll_interval:", "retention:", "store:", "tools[0].name:", "tools[0].support:", "ttl:"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want %q", tt.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("Validate = %q, want %d problems %q", lines, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("problem %d = %q, want it to start with %q", i, lines[i], w)
				}
			}
		})
	}
}

// gatedStore holds every Create until gate is closed, announcing on
// entered that one is waiting.
type gatedStore struct {
	*MemoryStore
	entered chan struct{}
	gate    chan struct{}
}

func (s gatedStore) Create(ctx context.Context, t *Task, caps Caps) error {
	s.entered <- struct{}{}
	<-s.gate
	return s.MemoryStore.Create(ctx, t, caps)
}

// TestShutdownDuringStart shuts the manager down while a Start is saving
// its task: Shutdown must not return while that task runs, and the task
// must end failed when Shutdown's context ends.
func TestShutdownDuringStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := gatedStore{NewMemoryStore(nil), make(chan struct{}, 1), make(chan struct{})}
		m := NewManager(testOptions, Deps{Store: store})
		shutdownAtEnd(t, m)
		type started struct {
			task *Task
			err  error
		}
		causes := make(chan error, 1)
		result := make(chan started, 1)
		go func() {
			task, err := m.Start(context.Background(), "alice", "slow", blockUntilDone(causes))
			result <- started{task, err}
		}()
		<-store.entered
		shutdownDone := make(chan struct{})
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			m.Shutdown(ctx)
			close(shutdownDone)
		}()
		synctest.Wait()
		close(store.gate)
		s := <-result
		synctest.Wait()
		if s.err != nil {
			if !errors.Is(s.err, ErrStopped) {
				t.Fatalf("Start during Shutdown: %v, want ErrStopped or a task", s.err)
			}
			return
		}
		select {
		case <-shutdownDone:
			t.Fatal("Shutdown returned while the task a concurrent Start created runs")
		default:
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		select {
		case <-shutdownDone:
		default:
			t.Fatal("Shutdown still waits after its context ended")
		}
		if cause := <-causes; !errors.Is(cause, ErrStopped) {
			t.Errorf("work's context ended with %v, want ErrStopped", cause)
		}
		if got := mustGet(t, m, "alice", s.task.ID); got.Status != StatusFailed || !strings.Contains(got.StatusMessage, "server stopped") {
			t.Errorf("task %+v, want failed: the server stopped", got)
		}
	})
}

// TestRetention checks that a finished task is kept for the retention,
// and then forgotten.
func TestRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _, _ := newTestManager(t, testOptions)
		task, err := m.Start(context.Background(), "alice", "quick", func(context.Context, Input) Outcome {
			return Outcome{Result: json.RawMessage(`{"content":[]}`)}
		})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		time.Sleep(testOptions.Retention - time.Second)
		if got := mustGet(t, m, "alice", task.ID); got.Status != StatusCompleted {
			t.Fatalf("within the retention: %+v", got)
		}
		time.Sleep(time.Second)
		if _, err := m.Get(context.Background(), "alice", task.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("after the retention: %v, want ErrNotFound", err)
		}
	})
}

// TestRespondThroughOtherReplica answers a task's input request through
// replica b while the task runs in replica a: a's work resumes at once
// when a hears of the change, within a poll interval when it does not.
func TestRespondThroughOtherReplica(t *testing.T) {
	tests := []struct {
		name   string
		runA   bool
		within time.Duration
	}{
		{name: "a subscribed", runA: true, within: 0},
		{name: "a polling", runA: false, within: testOptions.PollInterval},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := NewMemoryStore(nil)
				a := NewManager(testOptions, Deps{Store: store})
				b := NewManager(testOptions, Deps{Store: store})
				shutdownAtEnd(t, a)
				if tt.runA {
					runManager(t, a)
				}
				resumed := make(chan time.Time, 1)
				task, err := a.Start(context.Background(), "alice", "ask", func(_ context.Context, in Input) Outcome {
					if in.Responses == nil {
						return Outcome{InputRequests: map[string]json.RawMessage{"q": json.RawMessage(`{"method":"elicitation/create"}`)}}
					}
					resumed <- time.Now()
					return Outcome{Result: json.RawMessage(`{"content":[]}`)}
				})
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(testOptions.PollInterval / 3) // off the poll ticks
				synctest.Wait()
				answered := time.Now()
				if err := b.Respond(context.Background(), "alice", task.ID, map[string]json.RawMessage{"q": json.RawMessage(`{"action":"accept"}`)}); err != nil {
					t.Fatal(err)
				}
				at := <-resumed
				if d := at.Sub(answered); d > tt.within {
					t.Errorf("a's work resumed %v after b delivered the response, want at most %v", d, tt.within)
				}
				synctest.Wait()
				if got := mustGet(t, b, "alice", task.ID); got.Status != StatusCompleted {
					t.Errorf("task %+v, want completed", got)
				}
			})
		})
	}
}

// TestExpiredTasksLeaveMemory checks that the memory store lets go of
// tasks past their Expires even if nobody asks for them again: a server
// running for weeks must not keep every result it ever produced.
func TestExpiredTasksLeaveMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _, store := newTestManager(t, testOptions)
		runManager(t, m)
		for range 5 {
			if _, err := m.Start(context.Background(), "alice", "quick", func(context.Context, Input) Outcome {
				return Outcome{Result: json.RawMessage(`{"content":[]}`)}
			}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		time.Sleep(testOptions.Retention + testOptions.Lease)
		synctest.Wait()
		store.mu.Lock()
		n := len(store.tasks)
		store.mu.Unlock()
		if n != 0 {
			t.Errorf("the store still holds %d tasks a lease after their retention ended", n)
		}
	})
}

// flakyStore is a MemoryStore whose Update fails while down is set.
type flakyStore struct {
	*MemoryStore
	down atomic.Bool
}

func (s *flakyStore) Update(ctx context.Context, id string, fn func(*Task) error) (*Task, error) {
	if s.down.Load() {
		return nil, errors.New("store unreachable")
	}
	return s.MemoryStore.Update(ctx, id, fn)
}

// TestStoreOutageWhileParking: a round that asks for input while the store
// cannot be written keeps retrying, and the task shows its requests once
// the store is back (rather than showing working forever); an end reached
// during an outage is recorded once the store is back.
func TestStoreOutageWhileParking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &flakyStore{MemoryStore: NewMemoryStore(nil)}
		m := NewManager(testOptions, Deps{Store: store, Observer: &recorder{}})
		shutdownAtEnd(t, m)
		ctx := context.Background()
		proceed := make(chan struct{})
		task, err := m.Start(ctx, "alice", "ask", func(_ context.Context, in Input) Outcome {
			if in.Responses == nil {
				<-proceed
				return Outcome{InputRequests: map[string]json.RawMessage{"q": json.RawMessage(`{"method":"elicitation/create"}`)}}
			}
			<-proceed
			return Outcome{Result: json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)}
		})
		if err != nil {
			t.Fatal(err)
		}
		store.down.Store(true)
		proceed <- struct{}{}
		time.Sleep(time.Minute) // the outage, on the bubble's clock
		if got := mustGet(t, m, "alice", task.ID); got.Status != StatusWorking {
			t.Fatalf("during the outage: %s, want working (nothing could be written)", got.Status)
		}
		store.down.Store(false)
		time.Sleep(6 * time.Second) // one backoff step at most
		if got := mustGet(t, m, "alice", task.ID); got.Status != StatusInputRequired || got.InputRequests["q"] == nil {
			t.Fatalf("after the outage: %+v, want input_required asking q", got)
		}
		if err := m.Respond(ctx, "alice", task.ID, map[string]json.RawMessage{"q": json.RawMessage(`{"action":"accept"}`)}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		store.down.Store(true)
		proceed <- struct{}{}
		time.Sleep(time.Minute)
		store.down.Store(false)
		time.Sleep(6 * time.Second)
		if got := mustGet(t, m, "alice", task.ID); got.Status != StatusCompleted {
			t.Fatalf("an end reached during an outage: %s, want completed once the store is back", got.Status)
		}
	})
}
