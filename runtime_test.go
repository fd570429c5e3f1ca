package portcullis

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestTuneRuntime changes process-wide GC settings, so it restores them and
// never runs in parallel.
func TestTuneRuntime(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name       string
		env        map[string]string // process environment (also passed as environ)
		provider   memlimit.Provider
		startGOGC  int
		wantGOGC   int
		wantLimit  int64
		wantSource [2]string // GOGC source, memory limit source
		wantFloor  uint64    // heap floor the tuner was started with; 0: not started
		wantLog    string
	}{
		{
			name: "defaults from a cgroup limit", provider: memlimit.Limit(gib), startGOGC: 100,
			wantGOGC: defaultGOGC, wantLimit: scaled(gib, memLimitRatio), wantSource: [2]string{"tuned", "detected"},
			wantFloor: heapFloor, wantLog: "memory_limit_bytes",
		},
		{
			name: "a small cgroup limit lowers the heap floor", provider: memlimit.Limit(64 << 20), startGOGC: 100,
			wantGOGC: defaultGOGC, wantLimit: scaled(64<<20, memLimitRatio), wantSource: [2]string{"tuned", "detected"},
			wantFloor: uint64(scaled(64<<20, memLimitRatio)) / 2, wantLog: "heap_floor_bytes",
		},
		{
			name: "GOGC from the environment is kept", env: map[string]string{"GOGC": "50"}, provider: memlimit.Limit(gib),
			startGOGC: 50, wantGOGC: 50, wantLimit: scaled(gib, memLimitRatio), wantSource: [2]string{"env", "detected"},
		},
		{
			name: "GOMEMLIMIT from the environment is kept", env: map[string]string{"GOMEMLIMIT": "123MiB"},
			provider:  func() (uint64, error) { t.Error("provider called although GOMEMLIMIT is set"); return 0, nil },
			startGOGC: 100, wantGOGC: defaultGOGC, wantLimit: 123 << 20, wantSource: [2]string{"tuned", "env"}, wantFloor: 123 << 19,
		},
		{
			name: "AUTOMEMLIMIT sets the ratio", env: map[string]string{"AUTOMEMLIMIT": "0.5"}, provider: memlimit.Limit(gib),
			startGOGC: 100, wantGOGC: defaultGOGC, wantLimit: gib / 2, wantSource: [2]string{"tuned", "detected"}, wantFloor: heapFloor,
		},
		{
			name: "no limit anywhere", provider: func() (uint64, error) { return 0, memlimit.ErrNoLimit },
			startGOGC: 100, wantGOGC: defaultGOGC, wantLimit: math.MaxInt64, wantSource: [2]string{"tuned", "detected"}, wantFloor: heapFloor,
		},
		{
			name: "a failing provider is logged, not fatal", provider: func() (uint64, error) { return 0, errors.New("no cgroup here") },
			startGOGC: 100, wantGOGC: defaultGOGC, wantLimit: math.MaxInt64, wantSource: [2]string{"tuned", "detected"},
			wantFloor: heapFloor, wantLog: "no cgroup here",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			oldGOGC, oldLimit := debug.SetGCPercent(tt.startGOGC), debug.SetMemoryLimit(math.MaxInt64)
			t.Cleanup(func() { debug.SetGCPercent(oldGOGC); debug.SetMemoryLimit(oldLimit) })
			var environ []string
			for _, k := range []string{"GOGC", "GOMEMLIMIT", "AUTOMEMLIMIT"} {
				t.Setenv(k, "") // restored after the test
				if v, ok := tt.env[k]; ok {
					os.Setenv(k, v)
					environ = append(environ, k+"="+v)
				} else {
					os.Unsetenv(k)
				}
			}
			if v, ok := tt.env["GOMEMLIMIT"]; ok && v == "123MiB" {
				debug.SetMemoryLimit(123 << 20) // what the runtime did at start
			}
			var logs bytes.Buffer
			var floor uint64
			stopped := false
			saved := startTuner
			startTuner = func(f uint64) func() { floor = f; return func() { stopped = true } }
			t.Cleanup(func() { startTuner = saved })
			got := tuneRuntime(process{environ: environ}.getenv, tt.provider, slog.New(slog.NewTextHandler(&logs, nil)))
			if floor != tt.wantFloor || got.HeapFloor != tt.wantFloor {
				t.Errorf("heap floor: tuner started with %d, reported %d; want %d", floor, got.HeapFloor, tt.wantFloor)
			}
			if got.Stop(); tt.wantFloor != 0 && !stopped {
				t.Error("Stop did not stop the tuner")
			}

			if got.GOGC != tt.wantGOGC || currentGOGC() != tt.wantGOGC {
				t.Errorf("GOGC: reported %d, in effect %d; want %d", got.GOGC, currentGOGC(), tt.wantGOGC)
			}
			if lim := debug.SetMemoryLimit(-1); got.MemLimit != tt.wantLimit || lim != tt.wantLimit {
				t.Errorf("memory limit: reported %d, in effect %d; want %d", got.MemLimit, lim, tt.wantLimit)
			}
			if src := [2]string{got.GOGCSource, got.MemLimitSource}; src != tt.wantSource {
				t.Errorf("sources = %v, want %v", src, tt.wantSource)
			}
			if !strings.Contains(logs.String(), `msg="go runtime"`) || !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("log %q lacks the go runtime line or %q", logs.String(), tt.wantLog)
			}
		})
	}
}

// scaled is n×ratio as automemlimit computes it.
func scaled(n uint64, ratio float64) int64 { return int64(uint64(float64(n) * ratio)) }

func TestSetMemProfiling(t *testing.T) {
	saved := runtime.MemProfileRate
	t.Cleanup(func() { runtime.MemProfileRate = saved })
	tests := []struct {
		name    string
		godebug string
		start   int
		on      bool
		want    int
	}{
		{name: "off", start: defaultMemProfileRate, want: 0},
		{name: "on again", start: 0, on: true, want: defaultMemProfileRate},
		{name: "GODEBUG decides", godebug: "gctrace=0,memprofilerate=1", start: 1, want: 1},
		{name: "GODEBUG decides, on", godebug: "memprofilerate=0", start: 0, on: true, want: 0},
		{name: "other GODEBUG settings", godebug: "gctrace=0", start: defaultMemProfileRate, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GODEBUG", tt.godebug)
			runtime.MemProfileRate = tt.start
			setMemProfiling(tt.on)
			if runtime.MemProfileRate != tt.want {
				t.Errorf("MemProfileRate = %d, want %d", runtime.MemProfileRate, tt.want)
			}
		})
	}
}

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
