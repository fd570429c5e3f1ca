package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// streamPoll is how often an open standalone stream reads the log without
// being woken, so that an event whose bus message was lost is late, not
// lost; and how often it renews the session's idle timeout.
const streamPoll = 10 * time.Second

// streamRetry is the reconnection delay a standalone stream ended by a
// drain asks the client for.
const streamRetry = time.Second

// serveGET serves a GET of session id, of the protocol version, through
// its copy c. A Last-Event-ID of a request's stream is replayed by the
// copy from the log; the standalone
// stream is served from the log here, so that what any replica's copy
// sent reaches it, and a stream resumed on any replica goes on from the
// event it names. A drain ends it with a retry hint.
func (s *sharedSessions) serveGET(w http.ResponseWriter, r *http.Request, id string, c *sessionCopy, version string) {
	st := &standaloneStream{s: s, id: id, key: c.key, copy: c, version: version, last: -1}
	if v := r.Header.Values("Last-Event-ID"); len(v) > 0 {
		stream, n, ok := parseEventID(v[0])
		if !ok {
			http.Error(w, fmt.Sprintf("malformed Last-Event-ID %q", v[0]), http.StatusBadRequest)
			return
		}
		if stream != "" {
			serveRequestStream(w, r, c, stream, n)
			return
		}
		st.last, st.resumed = n, true
	}
	s.streams.serve(w, r, st)
}

// serveRequestStream serves a GET resuming a request's stream after the
// event n of stream, through the copy c: the SDK replays what the log
// holds after it and, when the stream is live on this replica, goes on.
// When it replayed nothing (the call's response is not written yet: its
// POST runs on another replica), the stream ends with an event naming
// that event again, and a retry hint: a client resumes from the event an
// ended stream last named, and one naming none would make the TypeScript
// SDK open a stream without Last-Event-ID, a second standalone stream.
func serveRequestStream(w http.ResponseWriter, r *http.Request, c *sessionCopy, stream string, n int) {
	rw := &replayWriter{ResponseWriter: w}
	c.ServeHTTP(rw, r)
	if rw.wrote || rw.code != 0 && rw.code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		return
	}
	fmt.Fprintf(w, "id: %s_%d\nretry: %d\ndata: \n\n", stream, n, streamRetry.Milliseconds())
}

// replayWriter is the [http.ResponseWriter] of a resumed request's stream:
// it notes whether anything was written, and the status.
type replayWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *replayWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *replayWriter) Write(b []byte) (int, error) {
	w.wrote = w.wrote || len(b) > 0
	return w.ResponseWriter.Write(b)
}

func (w *replayWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// standaloneStream is the standalone stream of a session served here
// from the log: after event last when resumed, else from now on, until
// the client goes, the session ends or the replica drains.
type standaloneStream struct {
	s       *sharedSessions
	id, key string
	copy    *sessionCopy // the copy whose subscriptions and level follow the record
	version string       // the session's protocol version
	last    int          // the number of the last event written
	resumed bool         // last is the client's Last-Event-ID

	w  http.ResponseWriter
	rc *http.ResponseController
}

// ServeHTTP serves the stream.
func (st *standaloneStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s, ctx := st.s, r.Context()
	wt := s.bus.watch(st.key)
	defer s.bus.unwatch(st.key, wt)
	evs, err := st.open(ctx)
	if err != nil {
		// Not 404: that would tell the client the session is gone.
		s.logger.WarnContext(ctx, "reading a session's stream", "error", err)
		http.Error(w, "Service unavailable: the session's events could not be read.", http.StatusServiceUnavailable)
		return
	}
	st.copy.begin(false)
	defer func() { st.copy.end(false) }()
	s.syncSubscriptions(ctx, st.key, st.copy)
	st.w, st.rc = w, http.NewResponseController(w)
	st.head()
	if st.resumed && len(evs) > 0 {
		s.events.replayed(ctx, len(evs))
	}
	poll := time.NewTicker(streamPoll)
	defer poll.Stop()
	for {
		if st.send(evs) != nil {
			return
		}
		select {
		case <-ctx.Done():
			if s.streams.isDraining() {
				// Ended by the drain: the client reconnects, with the id
				// of the last event, to another replica.
				fmt.Fprintf(w, "retry: %d\n\n", streamRetry.Milliseconds())
				_ = st.rc.Flush()
			}
			return
		case <-wt.events:
		case <-wt.subs:
			s.syncSubscriptions(ctx, st.key, st.copy)
			evs = nil // written already
			continue
		case <-poll.C:
			if !st.keep(ctx) {
				return
			}
		}
		if evs, err = s.after(ctx, st.key, &st.last); err != nil {
			evs = nil // read again at the next wake or poll
		}
	}
}

// open returns the events to write first: those after the client's
// Last-Event-ID, or none from the newest on.
func (st *standaloneStream) open(ctx context.Context) ([][]byte, error) {
	if !st.resumed {
		n, err := st.s.log.Last(ctx, st.key, "")
		if err != nil {
			return nil, err
		}
		st.last = n
	}
	return st.s.after(ctx, st.key, &st.last)
}

// head writes the stream's response header and its first event.
func (st *standaloneStream) head() {
	h := st.w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	st.w.WriteHeader(http.StatusOK)
	if st.version >= "2025-11-25" {
		// A priming event (SEP-1699): a client that loses the stream
		// before any event resumes from here, not from whatever is last
		// when it reconnects.
		fmt.Fprintf(st.w, "event: prime\nid: _%d\nretry: %d\ndata: \n\n", st.last, streamRetry.Milliseconds())
	} else {
		fmt.Fprint(st.w, ": ok\n\n")
	}
	_ = st.rc.Flush()
}

// send writes evs, the events after st.last, and flushes them.
func (st *standaloneStream) send(evs [][]byte) error {
	for _, d := range evs {
		st.last++
		if len(d) == 0 {
			continue
		}
		if _, err := fmt.Fprintf(st.w, "event: message\nid: _%d\ndata: %s\n\n", st.last, d); err != nil {
			return err
		}
	}
	if len(evs) == 0 {
		return nil
	}
	return st.rc.Flush()
}

// keep keeps the session while its stream is open, at each poll: its
// record's idle timeout restarts, a copy closed meanwhile is adopted
// again, and the copy follows the record's level. It reports false when
// the stream ends: the session is gone, or the client.
func (st *standaloneStream) keep(ctx context.Context) bool {
	s := st.s
	rec, ok, err := s.store.Get(ctx, st.key, s.ttl)
	switch {
	case err != nil:
	case !ok:
		return false // deleted or expired
	case s.copies.lookup(st.id) != st.copy:
		c, _, cerr := s.copies.connect(context.WithoutCancel(ctx), st.id, rec.Principal, &rec)
		if cerr != nil {
			return false
		}
		st.copy.end(false)
		st.copy = c
		st.copy.begin(false)
		s.syncSubscriptions(ctx, st.key, st.copy)
	}
	if ok {
		s.syncLevel(ctx, st.copy, rec.LogLevel)
	}
	if _, err := fmt.Fprint(st.w, ": keepalive\n\n"); err != nil || st.rc.Flush() != nil {
		return false
	}
	return true
}

// after returns the events of the standalone stream of the session keyed
// key after number *last. When some of them are no longer kept (the client
// was away longer than the log keeps them), it skips to the newest: the
// standalone stream carries notifications that something changed, and a
// client that reconnects fares better with the next of them than with an
// error; *last is moved accordingly.
func (s *sharedSessions) after(ctx context.Context, key string, last *int) ([][]byte, error) {
	evs, err := s.log.After(ctx, key, "", *last)
	if !errors.Is(err, sharedsession.ErrEventsDropped) {
		return evs, err
	}
	n, err := s.log.Last(ctx, key, "")
	if err != nil {
		return nil, err
	}
	*last = n
	return nil, nil
}

// parseEventID parses an event id as the SDK writes them, stream and
// number joined by "_"; the standalone stream's are "_n", and its priming
// event before any other is "_-1".
func parseEventID(id string) (stream string, n int, ok bool) {
	stream, num, found := strings.Cut(id, "_")
	if !found || strings.Contains(num, "_") {
		return "", 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < -1 || (n == -1 && stream != "") {
		return "", 0, false
	}
	return stream, n, true
}
