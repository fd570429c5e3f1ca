package sharedsession

import (
	"fmt"
	"testing"
	"time"
)

// TestMemoryLogForgetsExpiredStreams appends to a new stream
// every minute, each living ten minutes: the log keeps a bounded number
// of them, though none is read after it expired, and every live one.
func TestMemoryLogForgetsExpiredStreams(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewMemoryLog(func() time.Time { return now }, 10)
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
