package mcp

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// sharedSessions serves legacy sessions that the replicas share
// ([sharedsession.Backend]): a request naming a session is checked against
// its record in the [sharedsession.Store] (which restarts its idle
// timeout), or against the copy this replica holds while that copy is
// trusted, and a replica that holds no copy of the session adopts it: it
// connects a copy of its own to the SDK server, already initialized with
// the record's parameters, under the same id (sharedcopies.go). A session
// is made the same way: a copy of this replica's, whose initialize writes
// the record (sharedrecord.go).
//
// What a session's streams carry is kept in the [sharedsession.Log],
// shared by every replica (sharedevents.go): the standalone GET stream is
// served from there on any replica (sharedstream.go), whichever replica's
// copy sent a notification, and Last-Event-ID replays on any replica. A
// client's answer to a server→client request is published on the bus to
// every replica (sharedbus.go), whose copy of the session hands it to the
// call that waits for it.
//
// It serves requests between start and close, which end what it runs
// beside them: the subscription to the bus, the goroutines that hand
// answers to copies, and the copies themselves.
type sharedSessions struct {
	store      sharedsession.Store
	log        sharedsession.Log
	ttl        time.Duration // the idle timeout, of records and copies
	copies     *sessionCopies
	bus        *sharedBus
	events     *sharedEventStore // the SDK's view of events, for every copy
	caps       *sessionCap
	streams    *openStreams
	onAdopt    func(context.Context)
	onAnswer   func(context.Context)
	logger     *slog.Logger
	goroutines goroutines

	mu      sync.Mutex
	state   int                // stateNew, stateRunning, stateClosed
	stop    context.CancelFunc // ends start's context
	running atomic.Bool        // state == stateRunning, for each request

	// failMu guards the counting of store failures, logged at most once
	// per storeFailureLogEvery so that an outage is not a line per request.
	failMu      sync.Mutex
	failures    int       // since the last line logged
	lastFailLog time.Time // when that line was logged
}

// The states of [sharedSessions].
const (
	stateNew = iota
	stateRunning
	stateClosed
)

// defaultEventsKept is how many events of a stream the in-process log
// keeps when [sharedsession.Backend] names none.
const defaultEventsKept = 1000

// sharedConfig is what shared sessions are made of besides the server
// and its handler's caps and streams (see [Deps]).
type sharedConfig struct {
	backend    sharedsession.Backend
	ttl        time.Duration // the idle timeout
	logger     *slog.Logger
	onAdopt    func(context.Context)      // nil: none
	onAnswer   func(context.Context)      // nil: none
	onReplayed func(context.Context, int) // nil: none
}

// newSharedSessions returns the shared sessions of server, with the caps
// and streams of its handler; nil when cfg shares none.
func newSharedSessions(server *sdk.Server, caps *sessionCap, streams *openStreams, cfg sharedConfig) *sharedSessions {
	b, ttl := cfg.backend, cfg.ttl
	if b.Store == nil {
		return nil
	}
	if b.Log == nil {
		b.Log = sharedsession.NewMemoryLog(nil, defaultEventsKept)
	}
	if b.Bus == nil {
		b.Bus = sharedsession.NewMemoryBus()
	}
	s := &sharedSessions{store: b.Store, log: b.Log, ttl: ttl, caps: caps, streams: streams,
		onAdopt: orNone(cfg.onAdopt), onAnswer: orNone(cfg.onAnswer), logger: cfg.logger}
	replayed := cfg.onReplayed
	if replayed == nil {
		replayed = func(context.Context, int) {}
	}
	s.events = &sharedEventStore{log: b.Log, ttl: ttl, replayed: replayed, logger: cfg.logger, held: map[[2]string]*heldStream{}, resumeWait: resumeWait}
	s.copies = newSessionCopies(server, s.events, ttl)
	s.bus = newSharedBus(b.Bus, s.copies, cfg.logger, &s.goroutines)
	s.events.appended = s.bus.appended
	// Called under the copy's connection lock, maybe while connect holds
	// the copies' lock: forget the copy on a goroutine of its own.
	s.events.closed = func(id string) { s.goroutines.goOn(func() { s.copies.ended(id) }) }
	return s
}

func orNone(f func(context.Context)) func(context.Context) {
	if f == nil {
		return func(context.Context) {}
	}
	return f
}

// start subscribes to the bus (trying again in the background while it
// cannot, until ctx ends), and serves requests from then on, until close.
func (s *sharedSessions) start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateNew {
		return
	}
	ctx, s.stop = context.WithCancel(ctx)
	s.bus.start(ctx)
	s.state = stateRunning
	s.running.Store(true)
}

// close refuses requests from now on, ends the subscription to the bus
// and closes this replica's copies (the sessions go on, on other replicas
// and in the store), and returns once none of its goroutines is left.
func (s *sharedSessions) close() error {
	s.mu.Lock()
	s.running.Store(false)
	stop := s.stop
	s.state = stateClosed
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	err := s.bus.close()
	s.copies.closeAll()
	s.goroutines.close()
	return err
}

// refuseStopped answers a request that came before start or after close,
// and reports whether it did.
func (s *sharedSessions) refuseStopped(w http.ResponseWriter) bool {
	if s.running.Load() {
		return false
	}
	limits.WriteRefusal(w, http.StatusServiceUnavailable, 5*time.Second, "Service unavailable: this server does not serve sessions now. Retry later.")
	return true
}

// storeFailureLogEvery bounds how often a session store outage is logged.
const storeFailureLogEvery = 30 * time.Second

// storeFailed counts a failure of the store at now and reports whether to
// log it, with the failures counted since the last line (this one
// included).
func (s *sharedSessions) storeFailed(now time.Time) (n int, log bool) {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	s.failures++
	if !s.lastFailLog.IsZero() && now.Sub(s.lastFailLog) < storeFailureLogEvery {
		return s.failures, false
	}
	n, s.failures, s.lastFailLog = s.failures, 0, now
	return n, true
}
