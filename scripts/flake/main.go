// Command flake hunts tests that fail by chance: it runs the chosen
// packages' tests -count times on a few CPUs while busy loops compete for
// them, then prints every test that failed with its rate (failures/runs)
// and the output of its first failure. `make flake` runs it; CONTRIBUTING.md
// says when and how.
//
// The test processes (go test and everything it starts: test binaries,
// their servers, their child processes) and the busy loops are pinned to
// the same CPUs with taskset, and GOMAXPROCS is set to their number, so a
// test sees a machine with few cores that other work keeps busy: a wait
// that assumed its goroutine would run soon fails here. The test binaries
// are built first, without the busy loops, so the build is not slowed.
//
// Without package arguments it takes every package of the module whose
// tests use time, goroutines or the network: a test file imports time,
// context, sync, net, os/exec or testing/synctest (or a package under
// them), or starts a goroutine.
//
//	go run ./scripts/flake -count 20 -cpus 2 -hogs 4 ./...
//	go run ./scripts/flake -count 50 -run TestDrain -race ./e2e/ -tags e2e
//
// It exits non-zero when any test, package or build failed.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "-hog" {
		hog()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	failed, err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "flake:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// hog is one busy loop: the process the -hog argument starts, pinned to
// the tests' CPUs. It never returns; flake kills it.
func hog() {
	runtime.GOMAXPROCS(1)
	for {
		spins.Add(1)
	}
}

// spins is what a busy loop counts.
var spins atomic.Uint64

// config is what the flags set.
type config struct {
	count   int
	cpus    int
	hogs    int
	run     string
	skip    string
	tags    string
	race    bool
	timeout time.Duration
	dir     string
	modfile string
	jsonOut string
	pkgs    []string
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("flake", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.IntVar(&c.count, "count", 20, "run each test this many times (go test -count)")
	fs.IntVar(&c.cpus, "cpus", 2, "pin the tests and the busy loops to this many CPUs, and set GOMAXPROCS to it")
	fs.IntVar(&c.hogs, "hogs", -1, "busy-loop processes on those CPUs (default: twice -cpus)")
	fs.StringVar(&c.run, "run", "", "run only the tests matching this regular expression (go test -run)")
	fs.StringVar(&c.skip, "skip", "", "skip the tests matching this regular expression (go test -skip)")
	fs.StringVar(&c.tags, "tags", "", "build tags (go test -tags)")
	fs.BoolVar(&c.race, "race", false, "build with the race detector")
	fs.DurationVar(&c.timeout, "timeout", 0, "go test -timeout for each package's binary, all rounds together (default: 5m per round)")
	fs.StringVar(&c.dir, "C", ".", "the module folder to run in (e.g. a patched copy of the SDK)")
	fs.StringVar(&c.modfile, "modfile", "", "go test -modfile")
	fs.StringVar(&c.jsonOut, "json", "", "also write go test -json's stream to this file")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: flake [flags] [packages]  (default: every package whose tests use time, goroutines or the network)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.pkgs = fs.Args()
	if c.count < 1 {
		return c, fmt.Errorf("-count must be at least 1, got %d", c.count)
	}
	if c.cpus < 1 {
		return c, fmt.Errorf("-cpus must be at least 1, got %d", c.cpus)
	}
	if c.hogs < 0 {
		c.hogs = 2 * c.cpus
	}
	if c.timeout == 0 {
		c.timeout = time.Duration(c.count) * 5 * time.Minute
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (failed bool, err error) {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return false, err
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		return false, errors.New("taskset not found: it pins the tests to -cpus CPUs (Debian: util-linux)")
	}
	cpus, err := chooseCPUs(c.cpus)
	if err != nil {
		return false, err
	}
	if len(cpus) < c.cpus {
		fmt.Fprintf(stdout, "flake: only %d CPUs are allowed here; using them all\n", len(cpus))
	}
	cpuList := joinInts(cpus)
	gomaxprocs := strconv.Itoa(len(cpus))

	pkgs := c.pkgs
	if len(pkgs) == 0 {
		var left []string
		pkgs, left, err = timingPackages(ctx, c)
		if err != nil {
			return false, err
		}
		if len(pkgs) == 0 {
			return false, errors.New("no package with tests that use time, goroutines or the network")
		}
		fmt.Fprintf(stdout, "flake: %d packages whose tests use time, goroutines or the network", len(pkgs))
		if len(left) > 0 {
			fmt.Fprintf(stdout, "; left out: %s", strings.Join(left, " "))
		}
		fmt.Fprintln(stdout)
	}

	build := c.goTestArgs()
	// -exec true builds every test binary and runs none: the build errors
	// show here, and the hogs do not slow the compiler.
	build = append(build, "-exec", "true", "-count=1")
	build = append(build, pkgs...)
	fmt.Fprintf(stdout, "flake: building the test binaries\n")
	cmd := exec.CommandContext(ctx, "go", build...)
	cmd.Dir = c.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return false, fmt.Errorf("building the tests: %v\n%s", err, out)
	}

	stopHogs, err := startHogs(c.hogs, cpuList)
	if err != nil {
		return false, err
	}
	defer stopHogs()

	testArgs := append(c.goTestArgs(), "-json", "-count="+strconv.Itoa(c.count), "-timeout="+c.timeout.String())
	testArgs = append(testArgs, pkgs...)
	cmd = exec.CommandContext(ctx, "taskset", append([]string{"-c", cpuList, "go"}, testArgs...)...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+gomaxprocs)
	cmd.Stderr = stderr
	events, err := cmd.StdoutPipe()
	if err != nil {
		return false, err
	}
	var stream io.Reader = events
	if c.jsonOut != "" {
		if err := os.MkdirAll(filepath.Dir(c.jsonOut), 0o755); err != nil {
			return false, err
		}
		f, err := os.Create(c.jsonOut)
		if err != nil {
			return false, err
		}
		defer f.Close()
		stream = io.TeeReader(events, f)
	}
	race := ""
	if c.race {
		race = ", -race"
	}
	fmt.Fprintf(stdout, "flake: %d rounds on CPUs %s (GOMAXPROCS=%s) beside %d busy loops%s\n", c.count, cpuList, gomaxprocs, c.hogs, race)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return false, err
	}
	t := newTally()
	t.progress = stdout
	readErr := t.read(stream)
	waitErr := cmd.Wait()
	if readErr != nil {
		return false, readErr
	}
	var exit *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exit) {
		return false, waitErr
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	t.report(stdout, c.count, time.Since(start))
	if waitErr != nil && len(t.failures()) == 0 {
		return false, fmt.Errorf("go test failed (%v) but no test or package reported a failure", waitErr)
	}
	return len(t.failures()) > 0, nil
}

// goTestArgs are the go test flags both the build and the rounds take.
func (c config) goTestArgs() []string {
	args := []string{"test"}
	if c.modfile != "" {
		args = append(args, "-modfile", c.modfile)
	}
	if c.tags != "" {
		args = append(args, "-tags", c.tags)
	}
	if c.race {
		args = append(args, "-race")
	}
	if c.run != "" {
		args = append(args, "-run", c.run)
	}
	if c.skip != "" {
		args = append(args, "-skip", c.skip)
	}
	return args
}

// chooseCPUs returns the first n CPUs this process may run on (fewer when
// fewer are allowed), read from /proc/self/status.
func chooseCPUs(n int) ([]int, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, fmt.Errorf("reading the allowed CPUs: %v", err)
	}
	for line := range strings.Lines(string(status)) {
		list, ok := strings.CutPrefix(line, "Cpus_allowed_list:")
		if !ok {
			continue
		}
		cpus, err := parseCPUList(strings.TrimSpace(list))
		if err != nil {
			return nil, err
		}
		return cpus[:min(n, len(cpus))], nil
	}
	return nil, errors.New("no Cpus_allowed_list in /proc/self/status")
}

// parseCPUList parses a Linux CPU list such as "0-3,6,8-9".
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("bad CPU list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad CPU list %q", s)
			}
		}
		for cpu := a; cpu <= b; cpu++ {
			cpus = append(cpus, cpu)
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("bad CPU list %q", s)
	}
	return cpus, nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// startHogs starts n busy-loop processes pinned to cpuList and returns the
// function that kills them. They are also killed if flake dies first.
func startHogs(n int, cpuList string) (stop func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var procs []*os.Process
	stop = func() {
		for _, p := range procs {
			p.Kill()
			p.Wait()
		}
	}
	for range n {
		cmd := exec.Command("taskset", "-c", cpuList, exe, "-hog")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("starting a busy loop: %v", err)
		}
		procs = append(procs, cmd.Process)
	}
	return stop, nil
}

// timingImport matches the imports that make a package's tests depend on
// time, goroutines or the network.
var timingImport = regexp.MustCompile(`^(time|context|sync|net|os/exec|os/signal|testing/synctest)(/|$)`)

// goStatement matches a go statement in Go source.
var goStatement = regexp.MustCompile(`(?m)^\s*go\s+(func\b|[\pL_][\pL\pN_.]*\()`)

// listedPackage is what go list says of a package, for timingPackages.
type listedPackage struct {
	ImportPath   string
	Dir          string
	TestGoFiles  []string
	XTestGoFiles []string
	TestImports  []string
	XTestImports []string
}

// timingPackages lists the module's packages with tests and splits them
// into those whose tests use time, goroutines or the network, and the rest.
func timingPackages(ctx context.Context, c config) (timing, left []string, err error) {
	args := []string{"list", "-json=ImportPath,Dir,TestGoFiles,XTestGoFiles,TestImports,XTestImports"}
	if c.modfile != "" {
		args = append(args, "-modfile", c.modfile)
	}
	if c.tags != "" {
		args = append(args, "-tags", c.tags)
	}
	args = append(args, "./...")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = c.dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("go list: %v", err)
		}
		files := append(slices.Clone(p.TestGoFiles), p.XTestGoFiles...)
		if len(files) == 0 {
			continue
		}
		uses, err := usesTiming(p, files)
		if err != nil {
			return nil, nil, err
		}
		if uses {
			timing = append(timing, p.ImportPath)
		} else {
			left = append(left, p.ImportPath)
		}
	}
	return timing, left, nil
}

func usesTiming(p listedPackage, files []string) (bool, error) {
	for _, imp := range append(slices.Clone(p.TestImports), p.XTestImports...) {
		if timingImport.MatchString(imp) {
			return true, nil
		}
	}
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(p.Dir, f))
		if err != nil {
			return false, err
		}
		if goStatement.Match(src) {
			return true, nil
		}
	}
	return false, nil
}

// event is one line of go test -json (cmd/test2json's TestEvent).
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
	ImportPath  string
}

// key names a test, or with Test empty a package as a whole.
type key struct{ pkg, test string }

// result is what the rounds gave one test.
type result struct {
	runs, failures int
	first          string // the output of the first failure
	output         strings.Builder
	childFailed    bool // a subtest failed in the current run
}

// tally adds up go test -json's events.
type tally struct {
	results     map[key]*result
	buildOutput map[string]*strings.Builder
	pkgFailed   map[string]bool // a test of the package failed
	progress    io.Writer
}

func newTally() *tally {
	return &tally{results: map[key]*result{}, buildOutput: map[string]*strings.Builder{}, pkgFailed: map[string]bool{}}
}

func (t *tally) get(k key) *result {
	r := t.results[k]
	if r == nil {
		r = &result{}
		t.results[k] = r
	}
	return r
}

// read consumes a go test -json stream; lines that are not events (a
// build's own output) are kept as build output.
func (t *tally) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			t.buildLog("").WriteString(string(line) + "\n")
			continue
		}
		t.add(e)
	}
	return sc.Err()
}

func (t *tally) buildLog(pkg string) *strings.Builder {
	b := t.buildOutput[pkg]
	if b == nil {
		b = &strings.Builder{}
		t.buildOutput[pkg] = b
	}
	return b
}

// add takes one event.
func (t *tally) add(e event) {
	k := key{e.Package, e.Test}
	switch e.Action {
	case "build-output":
		t.buildLog(e.ImportPath).WriteString(e.Output)
	case "run":
		r := t.get(k)
		r.output.Reset()
		r.childFailed = false
	case "output":
		t.get(k).output.WriteString(e.Output)
	case "pass":
		if e.Test == "" {
			t.packageDone(e, t.get(k))
			return
		}
		t.get(k).runs++
	case "fail":
		r := t.get(k)
		if e.Test == "" {
			// A package fails when one of its tests did; count it on its
			// own only when none did (a panic outside a test, a timeout
			// after the last test, a failed build).
			if !t.pkgFailed[e.Package] {
				r.runs++
				r.failures++
				out := r.output.String()
				if e.FailedBuild != "" {
					out = t.buildLog(e.FailedBuild).String() + out
				}
				r.first = out
			}
			t.packageDone(e, r)
			return
		}
		r.runs++
		if parent, _, ok := cutLast(e.Test); ok {
			t.get(key{e.Package, parent}).childFailed = true
		}
		if r.childFailed {
			// Its subtest's failure is the one to report.
			return
		}
		r.failures++
		t.pkgFailed[e.Package] = true
		if r.failures == 1 {
			r.first = r.output.String()
		}
	}
}

// cutLast splits a subtest's name into its parent's and its own.
func cutLast(test string) (parent, name string, ok bool) {
	i := strings.LastIndexByte(test, '/')
	if i < 0 {
		return "", "", false
	}
	return test[:i], test[i+1:], true
}

// packageDone prints a line when a package's binary has finished.
func (t *tally) packageDone(e event, r *result) {
	if t.progress == nil {
		return
	}
	runs, failures := 0, 0
	for k, r := range t.results {
		if k.pkg == e.Package && k.test != "" {
			runs += r.runs
			failures += r.failures
		}
	}
	status := "ok  "
	if e.Action == "fail" {
		status = "FAIL"
	}
	fmt.Fprintf(t.progress, "%s %s: %d test runs, %d failed (%.0fs)\n", status, e.Package, runs, failures, e.Elapsed)
}

// failure is a test that failed at least once.
type failure struct {
	key
	runs, failures int
	first          string
}

// failures lists the tests that failed, most failures first.
func (t *tally) failures() []failure {
	var fs []failure
	for k, r := range t.results {
		if r.failures > 0 {
			fs = append(fs, failure{k, r.runs, r.failures, r.first})
		}
	}
	slices.SortFunc(fs, func(a, b failure) int {
		if a.failures != b.failures {
			return b.failures - a.failures
		}
		if c := strings.Compare(a.pkg, b.pkg); c != 0 {
			return c
		}
		return strings.Compare(a.test, b.test)
	})
	return fs
}

// maxOutputLines bounds the output shown per failing test.
const maxOutputLines = 60

// report prints the tally: the totals, each failing test with its rate,
// then the output of each one's first failure.
func (t *tally) report(w io.Writer, count int, took time.Duration) {
	tests, runs := 0, 0
	for k, r := range t.results {
		if k.test != "" && r.runs > 0 {
			tests++
			runs += r.runs
		}
	}
	fs := t.failures()
	fmt.Fprintf(w, "\nflake: %d tests, %d runs (%d rounds) in %s: ", tests, runs, count, took.Round(time.Second))
	if len(fs) == 0 {
		fmt.Fprintln(w, "no failure")
		return
	}
	fmt.Fprintf(w, "%d failed\n", len(fs))
	for _, f := range fs {
		fmt.Fprintf(w, "  %4d/%-4d %s %s\n", f.failures, f.runs, f.pkg, nameOf(f.key))
	}
	for _, f := range fs {
		fmt.Fprintf(w, "\n--- %s %s, first failure:\n", f.pkg, nameOf(f.key))
		lines := strings.Split(strings.TrimRight(f.first, "\n"), "\n")
		if len(lines) > maxOutputLines {
			fmt.Fprintf(w, "    (%d lines before these)\n", len(lines)-maxOutputLines)
			lines = lines[len(lines)-maxOutputLines:]
		}
		for _, l := range lines {
			fmt.Fprintln(w, "    "+l)
		}
	}
}

func nameOf(k key) string {
	if k.test == "" {
		return "(the package: no single test failed)"
	}
	return k.test
}
