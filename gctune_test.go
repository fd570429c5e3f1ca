package portcullis

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name        string
		live, floor uint64
		want        int
	}{
		{name: "no collection yet", live: 0, floor: 64 * mib, want: maxTunedGOGC},
		{name: "a tiny live heap is capped", live: 1 * mib, floor: 64 * mib, want: maxTunedGOGC},
		{name: "grow to the floor", live: 8 * mib, floor: 64 * mib, want: 700},
		{name: "half the floor live", live: 32 * mib, floor: 64 * mib, want: 100},
		{name: "more than half is Go's default", live: 40 * mib, floor: 64 * mib, want: minTunedGOGC},
		{name: "more than the floor", live: 500 * mib, floor: 64 * mib, want: minTunedGOGC},
		{name: "a lower floor", live: 8 * mib, floor: 28 * mib, want: 250},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := gcPercentFor(tt.live, tt.floor); got != tt.want {
				t.Errorf("gcPercentFor(%d MiB, %d MiB) = %d, want %d", tt.live/mib, tt.floor/mib, got, tt.want)
			}
		})
	}
}

// TestGCTuner runs the real tuner: after a collection it sets GOGC for the
// live heap, and once stopped it leaves GOGC alone. It changes process-wide
// GC settings, so it restores them and never runs in parallel.
func TestGCTuner(t *testing.T) {
	saved := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(saved) })
	for _, tt := range []struct {
		name  string
		start int // GOGC before the tuner starts
		floor uint64
		want  int
	}{
		{name: "a floor far above the live heap", start: 100, floor: 1 << 40, want: maxTunedGOGC},
		{name: "a floor below the live heap", start: 400, floor: 1, want: minTunedGOGC},
	} {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetGCPercent(tt.start)
			stop, tuner := startGCTuner(tt.floor)
			// collect runs a collection and waits for the tuner's cleanup
			// to run after it.
			collect := func() {
				t.Helper()
				runtime.GC()
				select {
				case <-tuner.ran:
				case <-time.After(10 * time.Second):
					t.Fatal("the tuner's cleanup did not run within 10s of a collection")
				}
			}
			collect()
			if got := currentGOGC(); got != tt.want || tuner.set.Load() != int64(tt.want) {
				t.Errorf("GOGC in effect %d, tuner set %d; want %d", got, tuner.set.Load(), tt.want)
			}
			stop()
			debug.SetGCPercent(123)
			select { // forget a run that a background collection started before stop
			case <-tuner.ran:
			default:
			}
			collect() // the cleanup runs, sees the stop, and no longer re-arms
			if got := currentGOGC(); got != 123 {
				t.Errorf("after stop GOGC is %d, want the 123 set by hand", got)
			}
		})
	}
}
