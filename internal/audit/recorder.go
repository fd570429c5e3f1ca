package audit

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Sink is where events go: a file, a syslog server, a collector. Write
// is called from one goroutine per sink, never concurrently.
type Sink interface {
	// Name names the sink in metrics and logs ("stderr", "syslog", ...).
	Name() string
	// Write delivers events, in order. An error means none of them is
	// known to have arrived: the recorder tries the same events again.
	Write(ctx context.Context, events []*Event) error
	// Close releases the sink after the last Write.
	Close() error
}

// Hooks receive what the recorder notices, for metrics and logs. Each
// may be nil, and must be fast and not block.
type Hooks struct {
	// Written counts events a sink took.
	Written func(sink string, n int)
	// Dropped counts events a sink's full queue could not take: they are
	// lost, and this is the only record of them.
	Dropped func(sink string, n int)
	// Failed reports a sink's failed Write; it is retried with backoff
	// while its queue holds the events that arrive meanwhile.
	Failed func(sink string, err error)
	// Recovered reports that a sink that failed took events again.
	Recovered func(sink string)
}

// RecorderOptions configure a [Recorder].
type RecorderOptions struct {
	// QueueSize is how many events each sink's queue holds while the
	// sink is slow or down. Zero means 10000.
	QueueSize int
	// BatchSize is the most events one Write delivers. Zero means 256.
	BatchSize int
	// Now reads the clock. Nil means time.Now.
	Now func() time.Time
	// Hooks receive what the recorder notices.
	Hooks Hooks
	// RetryMin and RetryMax bound the pause between tries of a failed
	// Write. Zero means 100ms and 5s.
	RetryMin, RetryMax time.Duration
}

// Recorder takes events and hands each to every sink through the sink's
// bounded queue. Record never blocks: when a sink's queue is full the
// event is dropped for that sink and counted ([Hooks.Dropped]). A nil
// *Recorder records nothing.
type Recorder struct {
	opts   RecorderOptions
	queues []*queue
	wg     sync.WaitGroup
	cancel context.CancelFunc
	closed chan struct{}
	once   sync.Once
}

type queue struct {
	sink Sink
	ch   chan *Event
}

// NewRecorder starts a recorder that sends to sinks until [Recorder.Close].
func NewRecorder(opts RecorderOptions, sinks ...Sink) *Recorder {
	if opts.QueueSize <= 0 {
		opts.QueueSize = 10000
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 256
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = 100 * time.Millisecond
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Recorder{opts: opts, cancel: cancel, closed: make(chan struct{})}
	for _, s := range sinks {
		q := &queue{sink: s, ch: make(chan *Event, opts.QueueSize)}
		r.queues = append(r.queues, q)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.run(ctx, q)
		}()
	}
	return r
}

// Enabled reports whether r sends events anywhere: emitters skip
// building an event for a recorder that is not.
func (r *Recorder) Enabled() bool { return r != nil && len(r.queues) > 0 }

// Record stamps e with the schema's id and time (unless set) and queues
// it for every sink. It never blocks.
func (r *Recorder) Record(e *Event) {
	if !r.Enabled() {
		return
	}
	if e.ID == "" {
		e.ID = newID()
	}
	if e.Time.IsZero() {
		e.Time = r.opts.Now()
	}
	select {
	case <-r.closed:
		for _, q := range r.queues {
			r.dropped(q, 1)
		}
		return
	default:
	}
	for _, q := range r.queues {
		select {
		case q.ch <- e:
		default:
			r.dropped(q, 1)
		}
	}
}

func (r *Recorder) dropped(q *queue, n int) {
	if r.opts.Hooks.Dropped != nil {
		r.opts.Hooks.Dropped(q.sink.Name(), n)
	}
}

// run delivers q's events to its sink in batches until the recorder
// closes and the queue is drained (or ctx ends the tries).
func (r *Recorder) run(ctx context.Context, q *queue) {
	batch := make([]*Event, 0, r.opts.BatchSize)
	failing := false
	for {
		var e *Event
		var ok bool
		select {
		case e, ok = <-q.ch:
		case <-r.closed:
			// Drain what is queued, then stop.
			select {
			case e, ok = <-q.ch:
			default:
				return
			}
		}
		if !ok {
			return
		}
		batch = append(batch[:0], e)
	fill:
		for len(batch) < cap(batch) {
			select {
			case e := <-q.ch:
				batch = append(batch, e)
			default:
				break fill
			}
		}
		pause := r.opts.RetryMin
		for {
			err := q.sink.Write(ctx, batch)
			if err == nil {
				if failing && r.opts.Hooks.Recovered != nil {
					r.opts.Hooks.Recovered(q.sink.Name())
				}
				failing = false
				if r.opts.Hooks.Written != nil {
					r.opts.Hooks.Written(q.sink.Name(), len(batch))
				}
				break
			}
			failing = true
			if r.opts.Hooks.Failed != nil {
				r.opts.Hooks.Failed(q.sink.Name(), err)
			}
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				// Closing, and the sink still fails: what it holds is lost.
				r.dropped(q, len(batch)+len(q.ch))
				return
			}
			pause = min(2*pause, r.opts.RetryMax)
		}
	}
}

// Close stops taking events, delivers what the queues hold until ctx
// ends (then drops and counts the rest), and closes the sinks.
func (r *Recorder) Close(ctx context.Context) error {
	if r == nil {
		return nil
	}
	var err error
	r.once.Do(func() {
		close(r.closed)
		done := make(chan struct{})
		go func() { r.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			r.cancel()
			<-done
		}
		r.cancel()
		var errs []error
		for _, q := range r.queues {
			errs = append(errs, q.sink.Close())
		}
		err = errors.Join(errs...)
	})
	return err
}
