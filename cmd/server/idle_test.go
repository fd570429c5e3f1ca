package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/portcullis-mcp/portcullis"
)

// initAllocBytes is what the runtime and the initialisation of every
// package linked into this test binary allocated on the heap before this
// package's own: package-level state built at start (compiled regular
// expressions, tables, templates) by the binary's dependencies, whatever
// command then runs. ReadMemStats counts it exactly.
var initAllocBytes = func() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}()

// Budgets of the idle heap, measured with go1.26 on linux/amd64 and
// GOMAXPROCS=2 (each P the runtime starts with costs about 18 KB of heap),
// with a small margin: the bytes that initialisation allocates, and
// the live heap once `serve --dev` has started, answered /readyz and a
// collection has run. Both count bytes the program allocated, not RSS, so
// they do not depend on the machine's load. The shipped build (make build:
// the patches of patches/go-sdk and patches/fosite) has its own: the fosite
// patches keep out of the binary dependencies whose initialisation
// allocates about 1.1 MB (950 KB of it govalidator's regular expressions,
// 280 KB of those kept). Lower a budget when a change saves memory; raise
// it only with a reason in the commit.
//
// cel-go (the policy's expression rules) accounts for about 480 KB of
// initialisation and 390 KB of the live heap: its packages and the
// protobuf descriptors of cel.dev/expr and googleapis' expr/v1alpha1 that
// they register at init, kept by the protobuf registry.
//
// The OpenAPI import (http_apis[].openapi: kin-openapi, which links
// santhosh-tekuri/jsonschema for a value validator Portcullis does not
// use, and whose initialisation compiles the JSON Schema metaschemas,
// 1.7 MB; go.yaml.in/yaml/v4; go-openapi/jsonpointer) accounts for about
// 1,810 KB of initialisation and 450 KB of the live heap. A patch of
// kin-openapi that drops that validator from the shipped build would take
// most of it back (the way patches/fosite drops govalidator).
//
// Measured: shipped, 3,212–3,214 KB by initialisation and 1,705–1,706 KB
// live (1,732 KB under -race); as released, 4,255–4,258 KB and
// 2,036–2,038 KB.
const (
	initAllocBudgetShipped = 3_250_000
	idleHeapBudgetShipped  = 1_760_000
	initAllocBudgetStock   = 4_300_000
	idleHeapBudgetStock    = 2_090_000
)

// idleHeapChildEnv, set in the environment, makes TestIdleHeapAfterStart
// measure in this process instead of starting a test binary to measure.
const idleHeapChildEnv = "IDLE_HEAP_TEST_CHILD"

// idleHeapLine starts the line on which the measuring process reports.
const idleHeapLine = "idle heap:"

// TestIdleHeapAfterStart starts `serve --dev` in a fresh test process with
// GOMAXPROCS=2, as the binary runs with its defaults (the authorization
// server off), and fails when initialisation allocated more than its
// budget or the live heap of the ready, idle server is over its budget:
// package-level state of a new dependency shows in both, whether or not
// the feature that brought it is on. Under the race detector, whose
// runtime allocates a varying amount at start, only the live heap counts.
func TestIdleHeapAfterStart(t *testing.T) {
	if os.Getenv(idleHeapChildEnv) != "" {
		initBytes, live := measureIdleHeap(t)
		fmt.Printf("%s %d %d\n", idleHeapLine, initBytes, live)
		return
	}
	shipped, race := buildKind(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestIdleHeapAfterStart$", "-test.count=1")
	cmd.Env = append(os.Environ(), idleHeapChildEnv+"=1", "GOMAXPROCS=2")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the measuring test process: %v\n%s", err, out)
	}
	var initBytes, live uint64
	for l := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(l, idleHeapLine); ok {
			if _, err := fmt.Sscan(rest, &initBytes, &live); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
		}
	}
	if live == 0 {
		t.Fatalf("the measuring test process reported nothing:\n%s", out)
	}

	initBudget, liveBudget, build := uint64(initAllocBudgetStock), uint64(idleHeapBudgetStock), "the build on go.mod as it is"
	if shipped {
		initBudget, liveBudget, build = initAllocBudgetShipped, idleHeapBudgetShipped, "the shipped build (make build's go.mod, from scripts/sdk-patch.sh)"
	}
	judged := ""
	if race {
		judged = ", not judged under -race"
	}
	t.Logf("%s: initialisation allocates %d bytes (budget %d%s); the live heap after start is %d bytes (budget %d)",
		build, initBytes, initBudget, judged, live, liveBudget)
	if initBytes > initBudget && !race {
		t.Errorf("%s: package initialisation allocates %d bytes, over the budget of %d: a dependency builds state at start (GODEBUG=inittrace=1 bin/portcullis version lists what each package allocates)",
			build, initBytes, initBudget)
	}
	if live > liveBudget {
		t.Errorf("%s: the live heap of an idle serve --dev is %d bytes, over the budget of %d (GODEBUG=inittrace=1 bin/portcullis version lists what each package's initialisation allocates)",
			build, live, liveBudget)
	}
}

// buildKind reports whether this test binary is built as make build builds
// the binary, with the go.mod scripts/sdk-patch.sh writes (make go-test
// runs go test -modfile on it), which replaces the SDK with its patched
// copy; and whether it runs under the race detector.
func buildKind(t *testing.T) (shipped, race bool) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("the test binary has no build info")
	}
	found := false
	for _, d := range bi.Deps {
		if d.Path == "github.com/modelcontextprotocol/go-sdk" {
			shipped, found = d.Replace != nil, true
		}
	}
	if !found {
		t.Fatal("the build info names no github.com/modelcontextprotocol/go-sdk")
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			race = s.Value == "true"
		}
	}
	return shipped, race
}

// measureIdleHeap starts serve --dev in process, waits until it listens and
// answers /readyz, collects garbage, reads the live heap and stops the
// server. It returns initAllocBytes and the live heap.
func measureIdleHeap(t *testing.T) (initBytes, live uint64) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logR, logW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := portcullis.Run(ctx, []string{"serve", "--dev", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"},
			portcullis.Environ(nil), portcullis.Streams(strings.NewReader(""), io.Discard, logW))
		logW.Close()
		done <- err
	}()
	addr := listeningAddr(t, logR)
	go io.Copy(io.Discard, logR) // the server's later log lines

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /readyz = %d, want 200", resp.StatusCode)
	}

	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	return initAllocBytes, s[0].Value.Uint64()
}

// listeningAddr reads the server's JSON log lines from r until the MCP
// listener's "listening" line and returns its address.
func listeningAddr(t *testing.T, r io.Reader) string {
	t.Helper()
	sc := bufio.NewScanner(r)
	var seen []string
	for sc.Scan() {
		var line struct{ Msg, Addr, Listener string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" && line.Listener != "metrics" {
			return line.Addr
		}
		seen = append(seen, sc.Text())
	}
	t.Fatalf("the server stopped before it logged its listening line:\n%s", strings.Join(seen, "\n"))
	return ""
}
