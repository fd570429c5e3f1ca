package mcp

import "time"

// toolWorkers runs tool calls on goroutines that outlive one call.
//
// A tool call bounded by a timeout runs on a goroutine of its own (see
// toolTimeoutMiddleware). A new goroutine starts with a small stack, and a
// call (the SDK's argument decoding and schema validation, then the tool)
// grows it several times, copying it each time, which shows in a CPU
// profile under load. A worker keeps its grown stack from one
// call to the next: a call is handed to a worker that is waiting, else it
// starts a new one. A worker left without work for idle ends, so an idle
// server keeps none, and a call that never returns holds only its own
// worker.
type toolWorkers struct {
	calls chan func() // unbuffered: a send succeeds only when a worker waits
	idle  time.Duration
}

// toolWorkerIdle is how long a worker waits for its next call.
const toolWorkerIdle = 10 * time.Second

func newToolWorkers(idle time.Duration) *toolWorkers {
	return &toolWorkers{calls: make(chan func()), idle: idle}
}

// run runs f on a waiting worker, or on a new one if none waits. It does
// not wait for f to return.
func (p *toolWorkers) run(f func()) {
	select {
	case p.calls <- f:
	default:
		go p.work(f)
	}
}

// work runs f, then the calls handed to it, until none comes for p.idle.
func (p *toolWorkers) work(f func()) {
	f()
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		select {
		case f := <-p.calls:
			f()
			t.Reset(p.idle)
		case <-t.C:
			return
		}
	}
}
