package portcullis

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
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

// echoAllocChildEnv, set in a test process's environment, makes
// TestServeEchoAllocBudget measure in that process and print the result on
// a line starting with echoAllocLine.
const (
	echoAllocChildEnv = "ECHO_ALLOC_TEST_CHILD"
	echoAllocLine     = "echo allocations:"
)

// TestServeEchoAllocBudget fails when a 2026-07-28 tools/call through the
// full stack allocates more than its budget. It measures in a test process
// of its own: the runtime counts every goroutine's allocations, and in the
// package's test process goroutines that earlier tests left behind (a
// server still stopping, an exporter's timer) allocate meanwhile, more of
// them the slower the machine.
func TestServeEchoAllocBudget(t *testing.T) {
	if os.Getenv(echoAllocChildEnv) != "" {
		allocs, bytes := measureEchoAllocs(t)
		fmt.Printf("%s %d %d\n", echoAllocLine, allocs, bytes)
		return
	}
	// The span exporter batches by count and by time: with an hour between
	// timed exports, only the count of calls decides how many exports a
	// measurement contains, not how long the calls took.
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeEchoAllocBudget$", "-test.count=1")
	cmd.Env = append(os.Environ(), echoAllocChildEnv+"=1", "OTEL_BSP_SCHEDULE_DELAY=3600000")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the measuring test process: %v\n%s", err, out)
	}
	var allocs, bytes uint64
	found := false
	for l := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(l, echoAllocLine); ok {
			if _, err := fmt.Sscan(rest, &allocs, &bytes); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("the measuring test process reported nothing:\n%s", out)
	}
	budget := uint64(echoAllocBudget)
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
	t.Logf("%d allocations per call (budget %d)", allocs, budget)
	if allocs > budget {
		t.Errorf("a 2026-07-28 tools/call echo makes %d allocations, over the budget of %d: find the new ones with go test -run '^$' -bench ServeEcho -memprofile mem.out ., go tool pprof -sample_index=alloc_objects -top mem.out", allocs, budget)
	}
}

// measureEchoAllocs returns the allocations and bytes of one call,
// averaged over 1,000 calls.
func measureEchoAllocs(t *testing.T) (allocs, bytes uint64) {
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
	a := testing.AllocsPerRun(1000, func() {
		if err := call(); err != nil && failed == nil {
			failed = err
		}
	})
	runtime.ReadMemStats(&after)
	if failed != nil {
		t.Fatal(failed)
	}
	// AllocsPerRun makes one warm-up run besides the 1,000 it counts.
	return uint64(a), (after.TotalAlloc - before.TotalAlloc) / 1001
}
