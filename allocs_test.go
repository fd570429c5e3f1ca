package portcullis

import (
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// echoAllocBudget is the most heap allocations one 2026-07-28 tools/call
// echo may make through the whole stack, in process: the server (auth,
// limits, telemetry, the MCP handler, the SDK) and the in-process HTTP
// client that sends it, both counted by the runtime together. Lower it when
// a change saves allocations; raise it only with a reason in the commit.
const echoAllocBudget = 430

// echoAllocBudgetRace is the same budget under the race detector, which
// makes sync.Pool drop a share of what is put back, at random.
const echoAllocBudgetRace = 470

// The same budgets for the SDK with the patches of patches/go-sdk (make
// build, make test), which make 404 allocations (443 under -race) and about
// 41 KB (66 KB under -race) of a call's. The SDK as released allocates
// about 205 KB, nearly all of it a 32 KiB read buffer per JSON value
// decoded, which a patch removes: a call over these budgets on a patched
// build means a patch no longer does its job.
const (
	echoAllocBudgetPatched     = 420
	echoAllocBudgetPatchedRace = 465
	echoBytesBudgetPatched     = 52 << 10
	echoBytesBudgetPatchedRace = 84 << 10
)

// sdkDecodesInPlace reports whether the SDK's JSON decoding works on the
// bytes in place, as with patches/go-sdk (go test -modfile
// .cache/sdk-patched/go.mod, which make test uses), rather than through a
// streaming decoder with a 32 KiB buffer per value, as released. Test
// binaries carry no module build info, so it asks the SDK itself.
func sdkDecodesInPlace(t *testing.T) bool {
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := jsonrpc.DecodeMessage(msg); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc-before.TotalAlloc)/10 < 4<<10
}

// TestServeEchoAllocBudget fails when a 2026-07-28 tools/call through the
// full stack allocates more than its budget. Allocation counts, unlike
// times, do not depend on the machine's load.
func TestServeEchoAllocBudget(t *testing.T) {
	call := startEchoServer(t)
	// Warm up: the verified-token cache, the SDK's schema caches, the
	// connection and the pools.
	for range 200 {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	var failed error
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	allocs := testing.AllocsPerRun(1000, func() {
		if err := call(); err != nil && failed == nil {
			failed = err
		}
	})
	runtime.ReadMemStats(&after)
	if failed != nil {
		t.Fatal(failed)
	}
	// AllocsPerRun makes one warm-up run besides the 1,000 it counts.
	bytes := (after.TotalAlloc - before.TotalAlloc) / 1001
	budget := float64(echoAllocBudget)
	if raceEnabled {
		budget = echoAllocBudgetRace
	}
	if sdkDecodesInPlace(t) {
		budget = echoAllocBudgetPatched
		bytesBudget := uint64(echoBytesBudgetPatched)
		if raceEnabled {
			budget, bytesBudget = echoAllocBudgetPatchedRace, echoBytesBudgetPatchedRace
		}
		t.Logf("%d bytes per call on the patched SDK (budget %d)", bytes, bytesBudget)
		if bytes > bytesBudget {
			t.Errorf("a 2026-07-28 tools/call echo allocates %d bytes on the patched SDK, over the budget of %d: does patches/go-sdk still remove the decoder buffers? go test -modfile .cache/sdk-patched/go.mod -run '^$' -bench ServeEcho -memprofile mem.out ., go tool pprof -sample_index=alloc_space -top mem.out", bytes, bytesBudget)
		}
	} else {
		t.Logf("%d bytes per call on the SDK as released", bytes)
	}
	t.Logf("%.0f allocations per call (budget %.0f)", allocs, budget)
	if allocs > budget {
		t.Errorf("a 2026-07-28 tools/call echo makes %.0f allocations, over the budget of %.0f: find the new ones with go test -run '^$' -bench ServeEcho -memprofile mem.out ., go tool pprof -sample_index=alloc_objects -top mem.out", allocs, budget)
	}
}
