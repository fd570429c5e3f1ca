package server

import "testing"

// echoAllocBudget is the most heap allocations one 2026-07-28 tools/call
// echo may make through the whole stack, in process: the server (auth,
// limits, telemetry, the MCP handler, the SDK) and the in-process HTTP
// client that sends it, both counted by the runtime together. Lower it when
// a change saves allocations; raise it only with a reason in the commit.
const echoAllocBudget = 585

// echoAllocBudgetRace is the same budget under the race detector, which
// makes sync.Pool drop a share of what is put back, at random.
const echoAllocBudgetRace = 625

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
	allocs := testing.AllocsPerRun(1000, func() {
		if err := call(); err != nil && failed == nil {
			failed = err
		}
	})
	if failed != nil {
		t.Fatal(failed)
	}
	budget := float64(echoAllocBudget)
	if raceEnabled {
		budget = echoAllocBudgetRace
	}
	t.Logf("%.0f allocations per call (budget %.0f)", allocs, budget)
	if allocs > budget {
		t.Errorf("a 2026-07-28 tools/call echo makes %.0f allocations, over the budget of %.0f: find the new ones with go test -run '^$' -bench ServeEcho -memprofile mem.out ./internal/server, go tool pprof -sample_index=alloc_objects -top mem.out", allocs, budget)
	}
}
