//lint:file-ignore SA1019 a legacy session keeps the log level a client of a revision before 2026-07-28 set, which that revision deprecates

package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
)

// The kinds of [busMessage].
const (
	busEvent         = "event"         // an event was appended to the session's standalone stream
	busAnswer        = "answer"        // Body holds a client's answers to server→client requests
	busSubscriptions = "subscriptions" // the session's subscriptions changed
	busRecord        = "record"        // the session's record changed otherwise (its log level)
	busEnded         = "ended"         // the session was deleted
)

// busMessage is what replicas tell each other of a session on the
// [SessionEvents] bus. It names the session by its [SessionKey] only.
type busMessage struct {
	Kind string          `json:"kind"`
	Key  string          `json:"key"`
	Body json.RawMessage `json:"body,omitempty"`
}

// watch is a standalone stream open on this replica, woken by what the bus
// says of its session.
type watch struct {
	events chan struct{} // an event was appended
	subs   chan struct{} // the subscriptions changed
}

func (s *sharedSessions) publish(ctx context.Context, m busMessage) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return s.events.Publish(ctx, b)
}

// appended tells every replica that the standalone stream of the session
// keyed key has a new event.
func (s *sharedSessions) appended(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.publish(ctx, busMessage{Kind: busEvent, Key: key}); err != nil {
		// The streams poll too: the event is late, not lost.
		s.logger.Warn("telling replicas of a session event", "error", err)
	}
}

// listen delivers what the bus says to this replica's copies and streams,
// until ctx ends. Once it listens, copies may be trusted (see
// [sharedSessions.trusts]); a gap in what it heard makes every copy read
// its record again.
func (s *sharedSessions) listen(ctx context.Context) error {
	err := s.events.Listen(ctx, func(b []byte) {
		var m busMessage
		if json.Unmarshal(b, &m) != nil {
			return
		}
		switch m.Kind {
		case busEvent:
			s.wake(m.Key, m.Kind)
		case busSubscriptions, busRecord:
			s.changes.Add(1)
			if _, ls := s.lookupKey(m.Key); ls != nil {
				ls.distrust(false)
			}
			if m.Kind == busSubscriptions {
				s.wake(m.Key, m.Kind)
			}
		case busAnswer:
			if id, ls := s.lookupKey(m.Key); ls != nil {
				go s.hand(id, ls, m.Body)
			}
		case busEnded:
			s.changes.Add(1)
			if _, ls := s.lookupKey(m.Key); ls != nil {
				ls.close()
			}
		}
	}, func() { s.epoch.Add(1) })
	if err == nil {
		// What was said before it listened was not heard.
		s.epoch.Add(1)
		s.busUp.Store(true)
	}
	return err
}

// listenUntilListening listens to the bus after a first try failed with
// err, trying again with a growing delay (up to 30 s) while that fails, as
// when Redis is down at start.
// Until it listens, streams still poll the log, and answers posted to
// other replicas do not reach this one's calls.
func (s *sharedSessions) listenUntilListening(ctx context.Context, err error) {
	delay := time.Second
	for ; err != nil; err = s.listen(ctx) {
		s.logger.Error("listening to the session bus; trying again", "error", err, "in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

// wake wakes this replica's streams of the session keyed key.
func (s *sharedSessions) wake(key, kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watches[key] {
		c := w.events
		if kind == busSubscriptions {
			c = w.subs
		}
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (s *sharedSessions) addWatch(key string) *watch {
	w := &watch{events: make(chan struct{}, 1), subs: make(chan struct{}, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watches[key] == nil {
		s.watches[key] = map[*watch]struct{}{}
	}
	s.watches[key][w] = struct{}{}
	return w
}

func (s *sharedSessions) dropWatch(key string, w *watch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watches[key], w)
	if len(s.watches[key]) == 0 {
		delete(s.watches, key)
	}
}

// hand hands body, a client's answers, to the copy ls of session id, as a
// POST of the client's would.
func (s *sharedSessions) hand(id string, ls *localSession, body []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if code := s.inject(ctx, id, ls, body); code != http.StatusAccepted {
		s.logger.Warn("handing an answer to a session", "status", code)
	}
}

// inject serves body as a POST of session id's client to its copy ls, and
// returns the status the copy answered.
func (s *sharedSessions) inject(ctx context.Context, id string, ls *localSession, body []byte) int {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "/", bytes.NewReader(body))
	if err != nil {
		return http.StatusInternalServerError
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set(mcpheader.SessionID, id)
	w := &discardWriter{header: http.Header{}, code: http.StatusOK}
	ls.ServeHTTP(w, r)
	return w.code
}

// request serves a request of method with params to the copy ls of
// session id, as its client would send it, and returns the status the copy
// answered.
func (s *sharedSessions) request(ctx context.Context, id string, ls *localSession, method string, params map[string]any) int {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "portcullis-sync", "method": method, "params": params})
	if err != nil {
		return http.StatusInternalServerError
	}
	return s.inject(ctx, id, ls, body)
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

// streamPoll is how often an open standalone stream reads the log without
// being woken, so that an event whose bus message was lost is late, not
// lost; and how often it renews the session's idle timeout.
const streamPoll = 10 * time.Second

// streamRetry is the reconnection delay a standalone stream ended by a
// drain asks the client for.
const streamRetry = time.Second

// serveSharedGET serves a GET of session id when sessions are shared. A
// Last-Event-ID of a request's stream is replayed by the copy ls from the
// log; the standalone stream is served from the log here, so that what
// any replica's copy sent reaches it, and a stream resumed on any replica
// goes on from the event it names. A drain ends it with a retry hint.
func (h *Handler) serveSharedGET(w http.ResponseWriter, r *http.Request, id string, ls *localSession, version string) {
	last := -1
	resumed := false
	if v := r.Header.Values("Last-Event-ID"); len(v) > 0 {
		stream, n, ok := parseEventID(v[0])
		if !ok {
			http.Error(w, fmt.Sprintf("malformed Last-Event-ID %q", v[0]), http.StatusBadRequest)
			return
		}
		if stream != "" {
			serveRequestStream(w, r, ls, stream, n)
			return
		}
		last, resumed = n, true
	}
	h.serveStream(w, r, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.streamShared(w, r, id, ls, last, resumed, version)
	}))
}

// serveRequestStream serves a GET resuming a request's stream after the
// event n of stream, through the copy ls: the SDK replays what the log
// holds after it and, when the stream is live on this replica, goes on.
// When it replayed nothing (the call's response is not written yet: its
// POST runs on another replica), the stream ends with an event naming
// that event again, and a retry hint: a client resumes from the event an
// ended stream last named, and one naming none would make the TypeScript
// SDK open a stream without Last-Event-ID, a second standalone stream.
func serveRequestStream(w http.ResponseWriter, r *http.Request, ls *localSession, stream string, n int) {
	rw := &replayWriter{ResponseWriter: w}
	ls.ServeHTTP(rw, r)
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

// streamShared writes the standalone stream of session id after event
// last (resumed), or from now on, until the client goes, the session ends
// or the replica drains.
func (h *Handler) streamShared(w http.ResponseWriter, r *http.Request, id string, ls *localSession, last int, resumed bool, version string) {
	s := h.shared
	ctx := r.Context()
	key := SessionKey(id)
	wt := s.addWatch(key)
	defer s.dropWatch(key, wt)
	if !resumed {
		n, err := s.events.Last(ctx, key, "")
		if err != nil {
			h.logger.WarnContext(ctx, "reading a session's stream", "error", err)
			http.Error(w, "Service unavailable: the session's events could not be read.", http.StatusServiceUnavailable)
			return
		}
		last = n
	}
	evs, err := s.after(ctx, key, &last)
	if err != nil {
		// Not 404: that would tell the client the session is gone.
		h.logger.WarnContext(ctx, "reading a session's stream", "error", err)
		http.Error(w, "Service unavailable: the session's events could not be read.", http.StatusServiceUnavailable)
		return
	}
	ls.begin(false)
	defer func() { ls.end(false) }()
	h.syncSubscriptions(ctx, id, ls)

	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	if version >= "2025-11-25" {
		// A priming event (SEP-1699): a client that loses the stream
		// before any event resumes from here, not from whatever is last
		// when it reconnects.
		fmt.Fprintf(w, "event: prime\nid: _%d\nretry: %d\ndata: \n\n", last, streamRetry.Milliseconds())
	} else {
		fmt.Fprint(w, ": ok\n\n")
	}
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	if resumed && len(evs) > 0 {
		s.sdkStore.replayed(ctx, len(evs))
	}

	poll := time.NewTicker(streamPoll)
	defer poll.Stop()
	for {
		for _, d := range evs {
			last++
			if len(d) == 0 {
				continue
			}
			if _, err := fmt.Fprintf(w, "event: message\nid: _%d\ndata: %s\n\n", last, d); err != nil {
				return
			}
		}
		if len(evs) > 0 {
			if rc.Flush() != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			if h.isDraining() {
				// Ended by the drain: the client reconnects, with the id
				// of the last event, to another replica.
				fmt.Fprintf(w, "retry: %d\n\n", streamRetry.Milliseconds())
				_ = rc.Flush()
			}
			return
		case <-wt.events:
		case <-wt.subs:
			h.syncSubscriptions(ctx, id, ls)
			continue
		case <-poll.C:
			// The stream keeps the session: its record's idle timeout
			// restarts, and a copy closed meanwhile is adopted again.
			rec, ok, err := s.store.Get(ctx, id, s.ttl)
			switch {
			case err != nil:
			case !ok:
				return // deleted or expired
			case s.lookup(id) != ls:
				nls, _, cerr := s.connect(context.WithoutCancel(ctx), id, rec.Principal, &rec)
				if cerr != nil {
					return
				}
				ls.end(false)
				ls = nls
				ls.begin(false)
				h.syncSubscriptions(ctx, id, ls)
			}
			if ok {
				h.syncLevel(ctx, id, ls, rec.LogLevel)
			}
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		}
		if evs, err = s.after(ctx, key, &last); err != nil {
			evs = nil // read again at the next wake or poll
		}
	}
}

// after returns the events of the standalone stream of the session keyed
// key after number *last. When some of them are no longer kept (the client
// was away longer than the log keeps them), it skips to the newest: the
// standalone stream carries notifications that something changed, and a
// client that reconnects fares better with the next of them than with an
// error; *last is moved accordingly.
func (s *sharedSessions) after(ctx context.Context, key string, last *int) ([][]byte, error) {
	evs, err := s.events.After(ctx, key, "", *last)
	if !errors.Is(err, ErrEventsDropped) {
		return evs, err
	}
	n, err := s.events.Last(ctx, key, "")
	if err != nil {
		return nil, err
	}
	*last = n
	return nil, nil
}

// syncSubscriptions subscribes the copy ls of session id to the resources
// its record names, and unsubscribes it from those it no longer names, as
// the client would: the stream on this replica then carries their updates
// even when the client subscribed on another.
func (h *Handler) syncSubscriptions(ctx context.Context, id string, ls *localSession) {
	s := h.shared
	rec, ok, err := s.store.Get(ctx, id, s.ttl)
	if err != nil || !ok {
		return
	}
	ls.mu.Lock()
	var add, drop []string
	for _, u := range rec.Subscriptions {
		if !ls.subscribed[u] {
			add = append(add, u)
		}
	}
	for u := range ls.subscribed {
		if !slices.Contains(rec.Subscriptions, u) {
			drop = append(drop, u)
		}
	}
	ls.mu.Unlock()
	for i, u := range append(add, drop...) {
		method := "resources/subscribe"
		if i >= len(add) {
			method = "resources/unsubscribe"
		}
		if code := s.request(ctx, id, ls, method, map[string]any{"uri": u}); code != http.StatusOK {
			h.logger.WarnContext(ctx, "following a session's subscription", "uri", u, "status", code)
		}
	}
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

// syncLevel sets the level of the copy ls of session id to level, the
// record's, as the client's logging/setLevel would, when the client set
// another on another replica. The SDK offers no other way to set a
// session's level.
func (h *Handler) syncLevel(ctx context.Context, id string, ls *localSession, level sdk.LoggingLevel) {
	ls.mu.Lock()
	same := ls.level == level
	ls.mu.Unlock()
	if same || level == "" {
		return
	}
	if code := h.shared.request(ctx, id, ls, "logging/setLevel", map[string]any{"level": level}); code != http.StatusOK {
		h.logger.WarnContext(ctx, "following a session's log level", "level", level, "status", code)
	}
}

// isDraining reports whether Drain was called.
func (h *Handler) isDraining() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.draining
}
