package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// countingLog counts the Appends to its log.
type countingLog struct {
	sharedsession.Log
	appends atomic.Int64
}

func (c *countingLog) Append(ctx context.Context, key, stream string, ttl time.Duration, data ...[]byte) (int, error) {
	c.appends.Add(1)
	return c.Log.Append(ctx, key, stream, ttl, data...)
}

// TestSharedEventStoreHeldStreams follows requests' streams through the
// SDK's event store as a copy's POSTs use it: held while the POST runs,
// dropped when the client got them, written to the log in one Append when
// it did not, and from then on an Append an event; written as well when
// resumed before the POST's end was noted, or once they outgrow heldMax. A
// stream opened outside a held POST, and the standalone stream, go to the
// log as they come.
func TestSharedEventStoreHeldStreams(t *testing.T) {
	const session = "s"
	events := func(n int) [][]byte {
		var out [][]byte
		for i := range n {
			out = append(out, []byte(fmt.Sprint("note", i)))
		}
		return out
	}
	tests := []struct {
		name        string
		held        bool     // the stream opens in a held POST
		before      [][]byte // appended while the POST runs, after the priming event
		delivered   bool     // how the POST ends; nil after: still running
		ends        bool     // the POST ends
		resume      bool     // the client resumes from the priming event before the end is noted
		after       [][]byte // appended after the POST ended
		want        []string // the log's events, the priming event ("") first
		wantAppends int
	}{
		{name: "delivered: nothing written", held: true, before: [][]byte{[]byte("resp")}, ends: true, delivered: true},
		{name: "delivered with notifications", held: true, before: [][]byte{[]byte("note"), []byte("resp")}, ends: true, delivered: true},
		{name: "lost before the response", held: true, before: [][]byte{[]byte("note")}, ends: true, after: [][]byte{[]byte("resp")},
			want: []string{"", "note", "resp"}, wantAppends: 2},
		{name: "lost with the response", held: true, before: [][]byte{[]byte("resp")}, ends: true, want: []string{"", "resp"}, wantAppends: 1},
		{name: "resumed before its end was noted", held: true, before: [][]byte{[]byte("note")}, resume: true, ends: true, delivered: true,
			want: []string{"", "note"}, wantAppends: 1},
		{name: "outgrows what is held", held: true, before: events(heldMax + 1), ends: true, delivered: true,
			want: append([]string{""}, stringsOf(events(heldMax+1))...), wantAppends: 2},
		{name: "opened outside a held POST", before: [][]byte{[]byte("resp")}, want: []string{"", "resp"}, wantAppends: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			log := &countingLog{Log: sharedsession.NewMemoryLog(nil, 1000)}
			e := &sharedEventStore{log: log, ttl: time.Hour, replayed: func(context.Context, int) {}, appended: func(string) {},
				logger: slog.New(slog.DiscardHandler), held: map[[2]string]*heldStream{}}
			r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", nil)
			release := func(bool) {}
			if tt.held {
				r, release = e.hold(r, session)
			}
			const stream = "r1"
			// As the SDK serves a POST: the stream opens in its context,
			// its priming event is appended there, the rest in the call's.
			if err := errors.Join(e.Open(r.Context(), session, stream), e.Append(r.Context(), session, stream, nil)); err != nil {
				t.Fatal(err)
			}
			for _, d := range tt.before {
				if err := e.Append(ctx, session, stream, d); err != nil {
					t.Fatal(err)
				}
			}
			if tt.resume {
				for _, err := range e.After(ctx, session, stream, 0) {
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			if tt.ends {
				release(tt.delivered)
			}
			for _, d := range tt.after {
				if err := e.Append(ctx, session, stream, d); err != nil {
					t.Fatal(err)
				}
			}
			got, err := log.After(ctx, sharedsession.Key(session), stream, -1)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(stringsOf(got), tt.want) {
				t.Errorf("the log holds %q, want %q", got, tt.want)
			}
			if n := log.appends.Load(); n != int64(tt.wantAppends) {
				t.Errorf("%d Appends to the log, want %d", n, tt.wantAppends)
			}
			if len(e.held) != 0 {
				t.Errorf("%d streams still held after their POST ended", len(e.held))
			}
		})
	}
}

// TestSharedEventStoreResumedBeforeWritten: a client resuming a request's
// stream that has nothing in the log (its POST's replica has not noticed
// yet that the client went) waits for it to be written, up to resumeWait;
// a stream still not written then (that replica is gone) is dropped, so
// that the client stops asking. The standalone stream goes to the log as
// it comes, and the replicas are told.
func TestSharedEventStoreResumedBeforeWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		log := sharedsession.NewMemoryLog(nil, 10)
		var told []string
		e := &sharedEventStore{log: log, ttl: time.Hour, replayed: func(context.Context, int) {}, appended: func(key string) { told = append(told, key) },
			logger: slog.New(slog.DiscardHandler), held: map[[2]string]*heldStream{}, resumeWait: resumeWait}
		const session = "s"
		after := func(stream string, index int) ([]string, error) {
			var out []string
			for d, err := range e.After(ctx, session, stream, index) {
				if err != nil {
					return out, err
				}
				out = append(out, string(d))
			}
			return out, nil
		}
		go func() {
			time.Sleep(resumeWait / 2)
			if _, err := log.Append(ctx, sharedsession.Key(session), "r1", time.Hour, nil, []byte("note")); err != nil {
				t.Error(err)
			}
		}()
		start := time.Now()
		if got, err := after("r1", 0); err != nil || !slices.Equal(got, []string{"note"}) {
			t.Errorf("a request's stream written while waited for: %q, %v; want [note]", got, err)
		}
		if waited := time.Since(start); waited < resumeWait/2 || waited > resumeWait/2+resumePoll {
			t.Errorf("waited %v for a stream written after %v", waited, resumeWait/2)
		}
		start = time.Now()
		if _, err := after("r2", 0); !errors.Is(err, sharedsession.ErrEventsDropped) {
			t.Errorf("a request's stream never written: %v, want %v", err, sharedsession.ErrEventsDropped)
		}
		if waited := time.Since(start); waited < resumeWait {
			t.Errorf("a stream never written dropped after %v, want %v", waited, resumeWait)
		}
		if err := e.Append(ctx, session, "", []byte("changed")); err != nil {
			t.Fatal(err)
		}
		if got, err := after("", -1); err != nil || !slices.Equal(got, []string{"changed"}) {
			t.Errorf("the standalone stream: %q, %v; want [changed]", got, err)
		}
		if !slices.Equal(told, []string{sharedsession.Key(session)}) {
			t.Errorf("replicas told of %q, want the session's key once", told)
		}
	})
}

func stringsOf(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}
