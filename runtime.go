package portcullis

import (
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"

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
// stack unwind every 512 KiB allocated, which is about one per MCP call.
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
