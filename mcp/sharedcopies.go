//lint:file-ignore SA1019 a legacy session keeps the log level a client of a revision before 2026-07-28 set, which that revision deprecates

package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// sessionCopies are the copies of shared sessions this replica holds: a
// copy is an SDK server session connected on a transport of Portcullis's,
// under the session's id, initialized with its record's parameters (or
// awaiting its initialize, for a session made here).
//
// A copy is trusted without reading the record again (see trusts) while
// the bus has listened without a gap since the record was last read or
// written here, the bus has not said that the session ended or its
// record changed, and less than a tenth of the idle timeout has passed
// since: a DELETE on any replica says so on the bus before it answers,
// and the record's idle timeout, restarted by that read, has nine tenths
// of it left. A session whose requests keep coming costs the store a read
// per replica and tenth of the idle timeout, not one per request; the
// price is that a session idle for more than nine tenths of the timeout
// may be ended before all of it.
type sessionCopies struct {
	server *sdk.Server
	events *sharedEventStore // the SDK's view of events, for every copy
	ttl    time.Duration     // the idle timeout of copies
	now    func() time.Time  // the clock of trust in copies; tests set theirs

	mu    sync.Mutex
	byID  map[string]*sessionCopy
	byKey map[string]string // [sharedsession.Key] → id, of byID

	// up is set once the bus listens. epoch counts its gaps (and its
	// start): a copy read in an earlier epoch may have missed that its
	// session ended. changes counts what the bus said of any session's
	// end or record, so that a read of a record that overlapped one of
	// them is not trusted.
	up      atomic.Bool
	epoch   atomic.Uint64
	changes atomic.Uint64
}

// trustFraction is the part of the idle timeout after which a copy's
// record is read again, restarting its idle timeout (see trusts).
const trustFraction = 10

// sessionCopy is this replica's copy of a shared session.
type sessionCopy struct {
	key       string // the session's [sharedsession.Key]
	ss        *sdk.ServerSession
	transport *sdk.StreamableServerTransport
	conn      sdk.Connection // the transport's, which the SDK reads
	events    *sharedEventStore
	principal string        // the record's
	ttl       time.Duration // the idle timeout

	mu         sync.Mutex
	level      sdk.LoggingLevel // the level the copy logs at
	posts      int              // POSTs in flight
	streams    int              // GET streams open
	timer      *time.Timer      // the idle timeout; nil once stopped
	subscribed map[string]bool  // the resources the copy is subscribed to
	version    string           // the protocol version the session negotiated
	readAt     time.Time        // when the record was last read or written here; zero: not trusted
	readEpoch  uint64           // sessionCopies.epoch then
	ended      bool             // closed, or the bus said the session ended
}

func newSessionCopies(server *sdk.Server, events *sharedEventStore, ttl time.Duration) *sessionCopies {
	return &sessionCopies{server: server, events: events, ttl: ttl, now: time.Now, byID: map[string]*sessionCopy{}, byKey: map[string]string{}}
}

// lookup returns the copy of session id this replica holds, or nil.
func (cs *sessionCopies) lookup(id string) *sessionCopy {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.byID[id]
}

// lookupKey returns the id and copy of the session keyed key that this
// replica holds; nil when it holds none.
func (cs *sessionCopies) lookupKey(key string) (string, *sessionCopy) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	id := cs.byKey[key]
	return id, cs.byID[id]
}

// connect connects a copy of session id under this replica and holds it:
// initialized with rec's parameters, or, for a nil rec, awaiting its
// initialize. The copy ends after the idle timeout without a request here.
// It returns the copy this replica already holds, if any.
func (cs *sessionCopies) connect(ctx context.Context, id, principal string, rec *sharedsession.Record) (c *sessionCopy, adopted bool, err error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c := cs.byID[id]; c != nil {
		return c, false, nil
	}
	t := &connectedTransport{StreamableServerTransport: &sdk.StreamableServerTransport{SessionID: id, EventStore: cs.events}}
	var opts *sdk.ServerSessionOptions
	var level sdk.LoggingLevel
	var version string
	if rec != nil {
		opts = &sdk.ServerSessionOptions{State: &sdk.ServerSessionState{
			InitializeParams:          rec.Initialize,
			InitializedParams:         &sdk.InitializedParams{},
			NegotiatedProtocolVersion: rec.ProtocolVersion,
			LogLevel:                  rec.LogLevel,
		}}
		level, version = rec.LogLevel, rec.ProtocolVersion
	}
	ss, err := cs.server.Connect(ctx, t, opts)
	if err != nil {
		return nil, false, err
	}
	key := sharedsession.Key(id)
	c = &sessionCopy{key: key, ss: ss, transport: t.StreamableServerTransport, conn: t.conn, events: cs.events, principal: principal, level: level, version: version, ttl: cs.ttl, subscribed: map[string]bool{}}
	c.timer = time.AfterFunc(cs.ttl, func() { ss.Close() })
	cs.byID[id] = c
	cs.byKey[key] = id
	return c, rec != nil, nil
}

// ended stops holding the copy of session id, which has ended: closed
// here (its idle timeout, a DELETE, the bus saying it ended) or by the SDK
// (a failed write). The SDK tells the copy's event store (see
// sharedEventStore.SessionClosed), so that no goroutine per idle session
// waits for the end. A copy is forgotten only by its end, and a new copy
// of id made only once it is, so the copy held under id is the one that
// ended.
func (cs *sessionCopies) ended(id string) {
	c := cs.lookup(id)
	if c == nil {
		return // its initialize failed before it was held
	}
	c.distrust(true)
	c.stopTimer()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.byID[id] == c {
		delete(cs.byID, id)
		delete(cs.byKey, c.key)
	}
}

// closeAll closes every copy this replica holds, ending the calls in
// flight on them.
func (cs *sessionCopies) closeAll() {
	cs.mu.Lock()
	all := make([]*sessionCopy, 0, len(cs.byID))
	for _, c := range cs.byID {
		all = append(all, c)
	}
	cs.mu.Unlock()
	for _, c := range all {
		c.stopTimer()
		c.abort()
	}
}

// readMark is the state of the bus as a read or write of a record begins.
type readMark struct {
	at             time.Time
	epoch, changes uint64
}

func (cs *sessionCopies) mark() readMark {
	return readMark{epoch: cs.epoch.Load(), changes: cs.changes.Load(), at: cs.now()}
}

// noteRead notes that the record of c's session was read or written,
// negotiating version, in a step begun at m: c is trusted from then on,
// unless the bus said something of any session meanwhile.
func (cs *sessionCopies) noteRead(c *sessionCopy, m readMark, version string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if version != "" {
		c.version = version
	}
	if cs.changes.Load() != m.changes || c.ended {
		return
	}
	c.readAt, c.readEpoch = m.at, m.epoch
}

// trusts reports whether a request of the session of c may be served
// without reading its record: c is live, the bus has listened without a
// gap since the record was read or written here and has not said since
// that the session ended or changed, and less than a tenth of the idle
// timeout has passed since.
func (cs *sessionCopies) trusts(c *sessionCopy) bool {
	if !cs.up.Load() {
		return false
	}
	epoch, now := cs.epoch.Load(), cs.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	age := now.Sub(c.readAt)
	return !c.ended && !c.readAt.IsZero() && c.readEpoch == epoch && age >= 0 && age < c.ttl/trustFraction
}

// listening notes that the bus listens, after a gap in what it heard or
// before it ever did: no copy read before is trusted any more.
func (cs *sessionCopies) listening() {
	cs.epoch.Add(1)
	cs.up.Store(true)
}

// changed notes that the bus said something of a session's end or record.
func (cs *sessionCopies) changed() { cs.changes.Add(1) }

// ServeHTTP serves a request of the session. The idle timeout is paused
// while a request runs, as the SDK handler pauses its own. The stream of
// a POST is held until the POST ends (see [sharedEventStore]), and
// written to the log only when the client went before the end or a write
// to it failed.
func (c *sessionCopy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	post := r.Method == http.MethodPost
	c.begin(post)
	defer c.end(post)
	if !post {
		c.transport.ServeHTTP(w, r)
		return
	}
	r, release := c.events.hold(r, c.ss.ID())
	dw := &deliveryWriter{ResponseWriter: w}
	defer func() { release(r.Context().Err() == nil && !dw.failed.Load()) }()
	c.transport.ServeHTTP(dw, r)
}

// known returns what the copy knows of its session's record: its
// principal and protocol version.
func (c *sessionCopy) known() sharedsession.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return sharedsession.Record{Principal: c.principal, ProtocolVersion: c.version}
}

// begin notes a request of the copy in flight (a POST, or a GET stream),
// pausing its idle timeout.
func (c *sessionCopy) begin(post bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil && c.posts+c.streams == 0 {
		c.timer.Stop()
	}
	if post {
		c.posts++
	} else {
		c.streams++
	}
}

// end ends a request begun with begin, restarting the idle timeout when
// it was the last one.
func (c *sessionCopy) end(post bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if post {
		c.posts--
	} else {
		c.streams--
	}
	if c.timer != nil && c.posts+c.streams == 0 {
		c.timer.Reset(c.ttl)
	}
}

func (c *sessionCopy) stopTimer() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// distrust makes the next request of c's session read its record; ended
// says that the session ended.
func (c *sessionCopy) distrust(ended bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readAt = time.Time{}
	c.ended = c.ended || ended
}

// close closes the copy, trusted no more.
func (c *sessionCopy) close() {
	c.distrust(true)
	c.ss.Close()
}

// abort closes the copy without waiting for the calls in flight on it:
// its connection closes first, which ends them (their contexts are
// cancelled, and what they wait for from the client fails), where
// closing the session alone would wait for them to end.
func (c *sessionCopy) abort() {
	c.distrust(true)
	_ = c.conn.Close()
	c.ss.Close()
}

// connectedTransport is the transport of a copy, which gives the SDK the
// connection it made as a [copyConn], and keeps it, for abort.
type connectedTransport struct {
	*sdk.StreamableServerTransport
	conn sdk.Connection
}

// Connect implements [sdk.Transport].
func (t *connectedTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	conn, err := t.StreamableServerTransport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.conn = newCopyConn(conn)
	return t.conn, nil
}

// inject serves body as a POST of the session's client to the copy, and
// returns the status the copy answered.
func (c *sessionCopy) inject(ctx context.Context, body []byte) int {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "/", bytes.NewReader(body))
	if err != nil {
		return http.StatusInternalServerError
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set(mcpheader.SessionID, c.ss.ID())
	w := &discardWriter{header: http.Header{}, code: http.StatusOK}
	c.ServeHTTP(w, r)
	return w.code
}

// request serves a request of method with params to the copy, as its
// client would send it, and returns the status the copy answered.
func (c *sessionCopy) request(ctx context.Context, method string, params map[string]any) int {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "portcullis-sync", "method": method, "params": params})
	if err != nil {
		return http.StatusInternalServerError
	}
	return c.inject(ctx, body)
}

// discardWriter is the [http.ResponseWriter] of a request this replica
// serves to itself: it keeps the status only.
type discardWriter struct {
	header http.Header
	code   int
	wrote  bool
}

func (d *discardWriter) Header() http.Header { return d.header }
func (d *discardWriter) WriteHeader(code int) {
	if !d.wrote {
		d.code, d.wrote = code, true
	}
}
func (d *discardWriter) Write(b []byte) (int, error) {
	d.WriteHeader(http.StatusOK)
	return len(b), nil
}
func (d *discardWriter) Flush() {}
