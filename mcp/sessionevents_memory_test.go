package mcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestMemorySessionEventsForgetExpiredStreams appends to a new stream
// every minute, each living ten minutes: the log keeps a bounded number
// of them, though none is read after it expired, and every live one.
func TestMemorySessionEventsForgetExpiredStreams(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewMemorySessionEvents(func() time.Time { return now }, 10)
	for i := range 1000 {
		if _, err := m.Append(t.Context(), "k", fmt.Sprint("req", i), 10*time.Minute, []byte("x")); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
	}
	if n := len(m.streams); n > 128 {
		t.Errorf("%d streams kept after 1000 of which 10 live, want at most 128", n)
	}
	for i := 991; i < 1000; i++ {
		if n, err := m.Last(t.Context(), "k", fmt.Sprint("req", i)); n != 0 || err != nil {
			t.Errorf("live stream req%d: Last = %d, %v; want 0", i, n, err)
		}
	}
}

// countingEvents counts the Appends to its log.
type countingEvents struct {
	SessionEvents
	appends int
}

func (c *countingEvents) Append(ctx context.Context, key, stream string, ttl time.Duration, data ...[]byte) (int, error) {
	c.appends++
	return c.SessionEvents.Append(ctx, key, stream, ttl, data...)
}

// TestSharedEventStorePriming follows a request's stream through the
// SDK's event store: its priming event is written with its first event, in
// one Append, and a client that resumes from the priming event before
// then finds nothing yet, not an error; after, it finds the event.
func TestSharedEventStorePriming(t *testing.T) {
	ctx := t.Context()
	log := &countingEvents{SessionEvents: NewMemorySessionEvents(nil, 10)}
	e := &sharedEventStore{events: log, ttl: time.Hour, replayed: func(context.Context, int) {}, appended: func(string) {}, primed: map[[2]string]bool{}}
	const session = "s"
	key := SessionKey(session)
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
	tests := []struct {
		name        string
		do          func() error
		stream      string
		index       int // resumed after
		want        []string
		wantErr     error
		wantAppends int // in all so far
	}{
		{name: "the priming event is held", do: func() error { return e.Append(ctx, session, "r1", nil) }, stream: "r1", index: 0},
		{name: "written with the response", do: func() error { return e.Append(ctx, session, "r1", []byte("resp")) }, stream: "r1", index: 0, want: []string{"resp"}, wantAppends: 1},
		{name: "from the start", stream: "r1", index: -1, want: []string{"", "resp"}, wantAppends: 1},
		{name: "a stream past the log", stream: "r2", index: 1, wantErr: ErrEventsDropped, wantAppends: 1},
		{name: "notifications before the response", do: func() error {
			return errors.Join(e.Append(ctx, session, "r3", nil), e.Append(ctx, session, "r3", []byte("note")), e.Append(ctx, session, "r3", []byte("resp")))
		}, stream: "r3", index: 0, want: []string{"note", "resp"}, wantAppends: 3},
		{name: "the standalone stream has no priming event", do: func() error { return e.Append(ctx, session, "", []byte("changed")) }, stream: "", index: -1, want: []string{"changed"}, wantAppends: 4},
	}
	for _, tt := range tests {
		if tt.do != nil {
			if err := tt.do(); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
		}
		got, err := after(tt.stream, tt.index)
		if !errors.Is(err, tt.wantErr) || !slices.Equal(got, tt.want) {
			t.Errorf("%s: After(%q, %d) = %q, %v; want %q, %v", tt.name, tt.stream, tt.index, got, err, tt.want, tt.wantErr)
		}
		if log.appends != tt.wantAppends {
			t.Errorf("%s: %d Appends to the log, want %d", tt.name, log.appends, tt.wantAppends)
		}
	}
	if n, err := log.Last(ctx, key, "r1"); n != 1 || err != nil {
		t.Errorf("Last of r1 = %d, %v; want 1: the priming event and the response", n, err)
	}
	// A copy that closes with a call unanswered forgets its priming event.
	if err := e.Append(ctx, session, "r4", nil); err != nil {
		t.Fatal(err)
	}
	if err := e.SessionClosed(ctx, session); err != nil {
		t.Fatal(err)
	}
	if len(e.primed) != 0 {
		t.Errorf("%d priming events held after the session closed, want none", len(e.primed))
	}
}
