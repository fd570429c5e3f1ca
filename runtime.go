package portcullis

import (
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// defaultGOGC is the garbage collector's target percentage when GOGC is not
// set, from start until the first collection; from then on the tuner sets
// it for a heap floor (see gctune.go). Go's default of 100 suits programs
// with a large live heap; a server whose live heap is a few MiB while every
// MCP call makes hundreds of KiB of short-lived garbage would spend much of
// its CPU in collections started at the minimum 4 MiB heap target.
const defaultGOGC = 400

// memLimitRatio is the share of the container's (or machine's) memory the
// Go runtime is told it may use, leaving room for non-heap memory.
const memLimitRatio = 0.9

// runtimeSettings are the garbage-collector settings in effect, for the
// start-up log line.
type runtimeSettings struct {
	GOGC           int
	GOGCSource     string // "env", or "tuned" (see gctune.go)
	HeapFloor      uint64 // bytes, when tuned
	MemLimit       int64  // bytes; math.MaxInt64 means no limit
	MemLimitSource string // "env" (GOMEMLIMIT or AUTOMEMLIMIT=off), or "detected"
	// Stop stops the tuner; the settings stay as they are.
	Stop func()
}

// startTuner starts the GOGC tuner; tests replace it.
var startTuner = func(floor uint64) (stop func()) {
	stop, _ = startGCTuner(floor)
	return stop
}

// tuneRuntime sets the garbage collector for a long-running server, unless
// the usual environment variables already say what to do. getenv reads the
// process environment (automemlimit reads GOMEMLIMIT and AUTOMEMLIMIT from
// the process itself):
//
//   - GOMEMLIMIT unset: the memory limit is [memLimitRatio] of what limit
//     reports (nil means the cgroup's memory limit, falling back to the
//     machine's memory), via github.com/KimMachineGun/automemlimit, which
//     also honours AUTOMEMLIMIT (a ratio, or "off");
//   - GOGC unset: GOGC starts at [defaultGOGC], and after every
//     collection a tuner sets it so that the heap may grow to [heapFloor]
//     (at most half the memory limit) before the next one, or to twice the
//     live heap once that is more (see gctune.go).
//
// A problem reading the limit is logged and leaves the limit unset: it
// never stops the server.
func tuneRuntime(getenv func(string) string, limit memlimit.Provider, logger *slog.Logger) runtimeSettings {
	s := runtimeSettings{GOGCSource: "env", MemLimitSource: "env", Stop: func() {}}
	if limit == nil {
		limit = memlimit.ApplyFallback(memlimit.FromCgroup, memlimit.FromSystem)
	}
	if getenv("GOMEMLIMIT") == "" && getenv("AUTOMEMLIMIT") != "off" {
		s.MemLimitSource = "detected"
	}
	var err error
	s.MemLimit, err = memlimit.Set(memlimit.WithProvider(limit), memlimit.WithRatio(memLimitRatio))
	if err != nil {
		logger.Warn("could not set the Go memory limit; set GOMEMLIMIT to choose one", "error", err)
	}
	if getenv("GOGC") != "" {
		s.GOGC = currentGOGC()
	} else {
		s.HeapFloor = heapFloor
		if s.MemLimit > 0 && s.MemLimit != math.MaxInt64 {
			s.HeapFloor = min(heapFloor, uint64(s.MemLimit)/2)
		}
		debug.SetGCPercent(defaultGOGC)
		s.GOGC, s.GOGCSource = defaultGOGC, "tuned"
		s.Stop = startTuner(s.HeapFloor)
	}
	attrs := []any{"gogc", s.GOGC, "gogc_source", s.GOGCSource, "memory_limit_source", s.MemLimitSource}
	if s.HeapFloor > 0 {
		attrs = append(attrs, "heap_floor_bytes", s.HeapFloor)
	}
	if s.MemLimit != math.MaxInt64 {
		attrs = append(attrs, "memory_limit_bytes", s.MemLimit)
	}
	logger.Info("go runtime", attrs...)
	return s
}

// currentGOGC reads the GC percentage in effect (-1 when GC is off).
func currentGOGC() int {
	m := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	return int(m[0].Value.Uint64())
}

// defaultMemProfileRate is Go's own runtime.MemProfileRate.
const defaultMemProfileRate = 512 * 1024

// setMemProfiling turns the runtime's memory-profiling samples on (at Go's
// default rate) or off, unless GODEBUG=memprofilerate sets the rate. Only a
// heap profile reads them, and server.allow_pprof is what serves one; but
// linking net/http/pprof for it makes the runtime take them always, a
// stack unwind every 512 KiB allocated, which an MCP call's garbage reaches
// often.
func setMemProfiling(on bool) {
	if strings.Contains(os.Getenv("GODEBUG"), "memprofilerate=") {
		return
	}
	if on {
		runtime.MemProfileRate = defaultMemProfileRate
	} else {
		runtime.MemProfileRate = 0
	}
}

// The garbage collector's target when GOGC is not set: a heap floor.
//
// Every MCP call makes short-lived garbage in the SDK, a sizeable share of
// the live heap of a server with few sessions. At a
// fixed GOGC the collector then runs every few dozen calls and costs a call
// more the smaller the live heap. Letting the heap grow to heapFloor before
// a collection, whatever the live heap, makes collections rare while little
// is live; once the live heap is more than half the floor (many legacy
// sessions), the target is Go's default, twice the live heap, so memory
// grows with what is live rather than five or ten times it.
const (
	// heapFloor is the heap the collector lets grow before collecting,
	// while the live heap is small. A memory limit lowers it (see
	// tuneRuntime).
	heapFloor = 64 << 20
	// minTunedGOGC and maxTunedGOGC bound the GOGC the tuner sets.
	minTunedGOGC = 100
	maxTunedGOGC = 1600
)

// gcPercentFor returns the GOGC under which a heap whose live part is live
// bytes grows to floor bytes before the next collection, within
// [minTunedGOGC, maxTunedGOGC]; live 0 (no collection yet) gives the
// maximum.
func gcPercentFor(live, floor uint64) int {
	if live == 0 {
		return maxTunedGOGC
	}
	p := (floor - min(live, floor)) * 100 / live
	return int(max(minTunedGOGC, min(maxTunedGOGC, p)))
}

// gcTuner sets GOGC after every collection to gcPercentFor the live heap
// that collection left.
type gcTuner struct {
	floor   uint64
	stopped atomic.Bool
	sample  []metrics.Sample // read in the cleanup goroutine only
	set     atomic.Int64     // GOGC last set, for tests
	// ran receives, without blocking, after each run of the cleanup, so a
	// test can wait for one instead of polling.
	ran chan struct{}
}

// startGCTuner starts tuning for floor and returns the function that stops
// it. It sets GOGC once a collection has run, not before.
func startGCTuner(floor uint64) (stop func(), t *gcTuner) {
	t = &gcTuner{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}, ran: make(chan struct{}, 1)}
	t.arm()
	return func() { t.stopped.Store(true) }, t
}

// arm allocates an object that nothing references, with a cleanup that
// runs once a collection has freed it: it tunes and arms again. The object
// is too big for the runtime's tiny allocator, whose blocks are freed only
// when all that share them are.
func (t *gcTuner) arm() {
	runtime.AddCleanup(new([32]byte), func(t *gcTuner) {
		defer t.signal()
		if t.stopped.Load() {
			return
		}
		t.tune()
		t.arm()
	}, t)
}

// tune sets GOGC for the live heap the last collection left, unless it is
// within a tenth of the GOGC in effect.
func (t *gcTuner) tune() {
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	p := gcPercentFor(t.sample[0].Value.Uint64(), t.floor)
	cur := currentGOGC()
	if cur > 0 && abs(p-cur)*10 < cur {
		return
	}
	debug.SetGCPercent(p)
	t.set.Store(int64(p))
}

func (t *gcTuner) signal() {
	select {
	case t.ran <- struct{}{}:
	default:
	}
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
