package mcp

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// sharedEventStore is the SDK's [sdk.EventStore] over [sharedsession.Log]: the
// streams of every replica's copy of a session land in one log, so that
// Last-Event-ID replays on any replica.
//
// A request's stream is written to the log only when its client may ask
// for it again. While the replica serving its POST writes it to the
// client, its events wait here (see hold), and once the POST ends they
// are dropped if the client got them all, or written to the log in one
// Append if it did not: the client went before the stream was done, or a
// write to it failed. From then on, what the stream still carries goes to
// the log as it comes, an Append an event, for the client to read on any
// replica. A client reads a request's stream again only when it lost it,
// so a call whose response reached its client costs the log nothing; a
// stream that carries more than heldMax events before its POST ends is
// written to the log then, so that a long call holds a bounded part of
// its stream here. A stream opened outside a held POST goes to the log as
// it comes, its priming event alone.
//
// The standalone stream (stream "") goes to the log as it comes, and the
// replicas are told (appended), since its events may be for a stream open
// on another replica.
type sharedEventStore struct {
	log      sharedsession.Log
	ttl      time.Duration
	replayed func(context.Context, int)
	appended func(key string)
	closed   func(sessionID string) // a copy's session ended
	logger   *slog.Logger
	// resumeWait is how long a resumed request's stream with nothing in
	// the log is waited for ([resumeWait]).
	resumeWait time.Duration

	mu   sync.Mutex
	held map[[2]string]*heldStream // by session id and stream: the streams of POSTs in flight
}

// heldMax is how many events of a request's stream wait for the end of
// its POST; the stream goes to the log from the next.
const heldMax = 32

// heldStream is a request's stream whose events wait for the end of its
// POST.
type heldStream struct {
	mu     sync.Mutex
	events [][]byte // the stream's events so far, its priming event first
	gone   bool     // dropped or written: its events go to the log
}

// heldPost is what a POST served by a copy carries in its context for the
// event store: the streams the SDK opened for it (one, or none for
// notifications and answers).
type heldPost struct {
	session string
	streams [][2]string
}

type heldPostKey struct{}

// hold returns r with a context in which the streams the SDK opens for
// it are held, and its end, to call with whether the client got
// everything the POST's response carried once the SDK served it.
func (e *sharedEventStore) hold(r *http.Request, sessionID string) (*http.Request, func(delivered bool)) {
	p := &heldPost{session: sessionID}
	ctx := r.Context()
	return r.WithContext(context.WithValue(ctx, heldPostKey{}, p)), func(delivered bool) {
		for _, k := range p.streams {
			e.release(context.WithoutCancel(ctx), k, delivered)
		}
	}
}

// release ends the wait of the stream k of a POST that ended: its events
// are dropped when delivered, else written to the log.
func (e *sharedEventStore) release(ctx context.Context, k [2]string, delivered bool) {
	e.mu.Lock()
	hs := e.held[k]
	e.mu.Unlock()
	if hs == nil {
		return
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if delivered {
		e.drop(k, hs)
		return
	}
	if err := e.write(ctx, k, hs); err != nil {
		e.logger.WarnContext(ctx, "writing a request's stream the client lost", "error", err)
	}
}

// write writes the events of hs, the held stream k, to the log and stops
// holding it, so that its next events go there. hs.mu must be held.
func (e *sharedEventStore) write(ctx context.Context, k [2]string, hs *heldStream) error {
	if hs.gone {
		return nil
	}
	var err error
	if len(hs.events) > 0 {
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		_, err = e.log.Append(wctx, sharedsession.Key(k[0]), k[1], e.ttl, hs.events...)
		cancel()
	}
	// Forgotten only once written, so that an Append waiting for hs.mu
	// meanwhile finds it gone and follows it in the log.
	e.drop(k, hs)
	return err
}

// writeTimeout bounds writing a held stream to the log.
const writeTimeout = 5 * time.Second

// drop stops holding hs, the held stream k. hs.mu must be held.
func (e *sharedEventStore) drop(k [2]string, hs *heldStream) {
	hs.gone, hs.events = true, nil
	e.mu.Lock()
	if e.held[k] == hs {
		delete(e.held, k)
	}
	e.mu.Unlock()
}

// heldStream returns the held stream k, or nil.
func (e *sharedEventStore) heldStream(k [2]string) *heldStream {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.held[k]
}

// Open implements [sdk.EventStore]: the SDK opens a stream for each POST
// carrying a request, in the POST's context, which holds it when the
// copy serves the POST.
func (e *sharedEventStore) Open(ctx context.Context, sessionID, streamID string) error {
	p, ok := ctx.Value(heldPostKey{}).(*heldPost)
	if !ok || streamID == "" || p.session != sessionID {
		return nil
	}
	k := [2]string{sessionID, streamID}
	e.mu.Lock()
	e.held[k] = &heldStream{}
	e.mu.Unlock()
	p.streams = append(p.streams, k)
	return nil
}

// Append implements [sdk.EventStore].
func (e *sharedEventStore) Append(ctx context.Context, sessionID, streamID string, data []byte) error {
	if streamID != "" {
		k := [2]string{sessionID, streamID}
		if hs := e.heldStream(k); hs != nil {
			hs.mu.Lock()
			if !hs.gone {
				hs.events = append(hs.events, data)
				var err error
				if len(hs.events) > heldMax {
					err = e.write(ctx, k, hs)
				}
				hs.mu.Unlock()
				return err
			}
			hs.mu.Unlock()
		}
	}
	// No coalescing: an identical list_changed may be a second change,
	// made on another replica, that the client must not miss.
	key := sharedsession.Key(sessionID)
	if _, err := e.log.Append(ctx, key, streamID, e.ttl, data); err != nil {
		return err
	}
	if streamID == "" {
		e.appended(key)
	}
	return nil
}

// After implements [sdk.EventStore]. A request's stream still held (its
// POST ended here a moment ago, and the client resumes it) is written to
// the log first. A request's stream with nothing in the log is one whose
// client went a moment ago, before the replica serving its POST noticed
// and wrote it, or one that replica can no longer write (it is gone, or
// the client got the whole stream): After waits up to resumeWait for it
// to be written, and then reports it dropped, so that the client stops
// asking for it.
func (e *sharedEventStore) After(ctx context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		k := [2]string{sessionID, streamID}
		if hs := e.heldStream(k); hs != nil {
			hs.mu.Lock()
			err := e.write(ctx, k, hs)
			hs.mu.Unlock()
			if err != nil {
				yield(nil, err)
				return
			}
		}
		key := sharedsession.Key(sessionID)
		evs, err := e.log.After(ctx, key, streamID, index)
		if errors.Is(err, sharedsession.ErrEventsDropped) && streamID != "" {
			// Dropped, or not written yet: read again once written.
			if err = e.waitWritten(ctx, key, streamID); err == nil {
				evs, err = e.log.After(ctx, key, streamID, index)
			}
		}
		if err != nil {
			yield(nil, err)
			return
		}
		if len(evs) > 0 {
			e.replayed(ctx, len(evs))
		}
		for _, d := range evs {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// resumeWait is how long a request's stream resumed with nothing in the
// log is waited for: the replica serving its POST writes it as soon as it
// notices that the client went, within milliseconds.
const resumeWait = 2 * time.Second

// waitWritten waits until the log holds something of the request's
// stream of the session keyed key, up to e.resumeWait; after that, the
// stream is dropped.
func (e *sharedEventStore) waitWritten(ctx context.Context, key, streamID string) error {
	deadline := time.Now().Add(e.resumeWait)
	for {
		n, err := e.log.Last(ctx, key, streamID)
		switch {
		case err != nil:
			return err
		case n >= 0:
			return nil
		case !time.Now().Before(deadline):
			return sharedsession.ErrEventsDropped
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(resumePoll):
		}
	}
}

// resumePoll is how often waitWritten reads the log.
const resumePoll = 50 * time.Millisecond

// SessionClosed implements [sdk.EventStore]. It keeps the streams: one
// replica's copy of a session ending is not the session ending; a DELETE
// drops them, and they expire. The streams of its POSTs in flight are
// theirs to release. It tells the replica that the copy ended.
func (e *sharedEventStore) SessionClosed(_ context.Context, sessionID string) error {
	if e.closed != nil {
		e.closed(sessionID)
	}
	return nil
}

// deliveryWriter is the [http.ResponseWriter] of a POST served by a copy:
// it notes whether a write or flush to the client failed, so that the
// POST's streams are written to the log when the client may lack part of
// them.
type deliveryWriter struct {
	http.ResponseWriter
	failed atomic.Bool
}

func (d *deliveryWriter) Write(b []byte) (int, error) {
	n, err := d.ResponseWriter.Write(b)
	if err != nil {
		d.failed.Store(true)
	}
	return n, err
}

// FlushError flushes what was written to the client.
func (d *deliveryWriter) FlushError() error {
	err := http.NewResponseController(d.ResponseWriter).Flush()
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		d.failed.Store(true)
	}
	return err
}

func (d *deliveryWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }
