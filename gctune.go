package portcullis

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// The garbage collector's target when GOGC is not set: a heap floor.
//
// Every MCP call makes about half a MiB of short-lived garbage in the SDK,
// while the live heap of a server with few sessions is a few MiB. At a
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
