package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat. It
// is 100 on every Linux architecture Go supports.
const clockTicks = 100

// server is one server process under test.
type server struct {
	name       string
	cmd        *exec.Cmd
	base       string // http://host:port
	metricsURL string // its /metrics page
	logPath    string
	// tokens are the bearer tokens its workers send, one per worker index
	// (nil: the harness's Portcullis tokens, which a bare server ignores).
	tokens []string
	// modernVersion, if set, is the Mcp-Protocol-Version its workers
	// declare on the 2026-07-28 path (for a server that knows no later).
	modernVersion string
	// tool is the echo tool's name on this server; empty means echo.
	tool string
	// mcpPath is the path of the MCP endpoint its workers call; empty
	// means /mcp.
	mcpPath string
	// upstream, if set, is the server this one proxies the calls to; its
	// CPU is read over the row too.
	upstream *server
	// store, if set, is the Redis this server keeps its legacy sessions
	// in; its CPU is read over the row too. It is not the server's own:
	// stopping the server leaves it running.
	store *server
	// balancer and replicas, if set, make this server a load balancer in
	// front of Portcullis replicas, with no process of its own: the row's
	// CPU, allocations, collections and RSS are the replicas', summed,
	// and the balancer's CPU is read beside them. Stopping the server
	// stops the balancer, then the replicas.
	balancer *server
	replicas []*server
	// paths, if set, are the only protocol paths its rows are measured on.
	paths []string
	// stopSignal ends the process; zero means SIGTERM.
	stopSignal syscall.Signal
	// rdb is a client of a Redis server (startRedis); nil for the others.
	rdb *redis.Client

	logFile  *os.File
	exited   chan struct{} // closed when the process has been waited for
	stopOnce sync.Once
	stopErr  error
}

// serverSpec says how to start a server.
type serverSpec struct {
	name       string
	bin        string
	args       []string
	env        []string
	addr       string // MCP listen address
	metricsURL string
	logPath    string // stdout and stderr go here
	cpu        string // taskset CPU list; empty means not pinned
	// ready reports whether the started server answers; nil means its
	// /readyz answers 200.
	ready func() bool
	// stopSignal ends the process; zero means SIGTERM.
	stopSignal syscall.Signal
}

// endpoint is the URL of the MCP endpoint its workers call.
func (s *server) endpoint() string {
	if s.mcpPath == "" {
		return s.base + "/mcp"
	}
	return s.base + s.mcpPath
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startServer starts spec and waits until its /readyz answers 200. It
// returns how long that took from the exec.
func startServer(ctx context.Context, spec serverSpec) (*server, time.Duration, error) {
	name, args := spec.bin, spec.args
	if spec.cpu != "" {
		name, args = "taskset", append([]string{"-c", spec.cpu, spec.bin}, spec.args...)
	}
	logFile, err := os.Create(spec.logPath)
	if err != nil {
		return nil, 0, err
	}
	cmd := exec.Command(name, args...)
	cmd.Env = spec.env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, 0, fmt.Errorf("starting %s: %w", spec.name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s := &server{name: spec.name, cmd: cmd, base: "http://" + spec.addr, metricsURL: spec.metricsURL,
		logPath: spec.logPath, logFile: logFile, exited: exited, stopSignal: spec.stopSignal}
	ready := spec.ready
	if ready == nil {
		client := &http.Client{Timeout: time.Second}
		ready = func() bool {
			resp, err := client.Get(s.base + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-exited:
			return nil, 0, fmt.Errorf("%s exited before it was ready:\n%s", spec.name, tail(spec.logPath))
		case <-ctx.Done():
			s.stop()
			return nil, 0, ctx.Err()
		default:
		}
		if ready() {
			return s, time.Since(start), nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, 0, fmt.Errorf("%s not ready after 15s:\n%s", spec.name, tail(spec.logPath))
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// stop sends SIGTERM, or the server's stopSignal (so Portcullis flushes
// its spans), and waits up to 10s. A balancer stops itself and then its
// replicas. Later calls return the first call's result.
func (s *server) stop() error {
	s.stopOnce.Do(func() {
		if s.cmd == nil {
			errs := []error{s.balancer.stop()}
			for _, r := range s.replicas {
				errs = append(errs, r.stop())
			}
			s.stopErr = errors.Join(errs...)
			return
		}
		s.stopErr = s.terminate()
	})
	return s.stopErr
}

func (s *server) terminate() error {
	defer s.logFile.Close()
	if s.rdb != nil {
		s.rdb.Close()
	}
	sig := s.stopSignal
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
		if !s.cmd.ProcessState.Success() {
			return fmt.Errorf("%s exited with %s", s.name, s.cmd.ProcessState)
		}
		return nil
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("%s did not stop within 10s of %v", s.name, sig)
	}
}

// sumOver adds f over the replicas of a balancer.
func sumOver(rs []*server, f func(*server) (int64, error)) (int64, error) {
	var total int64
	for _, r := range rs {
		v, err := f(r)
		if err != nil {
			return 0, err
		}
		total += v
	}
	return total, nil
}

// pid is the server's own pid (taskset execs it in place).
func (s *server) pid() int { return s.cmd.Process.Pid }

// cpuTicks returns utime+stime of the process, in clock ticks; of a
// balancer, its replicas' summed; of none (nil), 0.
func (s *server) cpuTicks() (int64, error) {
	if s == nil {
		return 0, nil
	}
	if s.replicas != nil {
		return sumOver(s.replicas, (*server).cpuTicks)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid()))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc/PID/stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, errors.New("short /proc/PID/stat")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return u + st, nil
}

// rssKiB returns VmRSS of the process; of a balancer, its replicas'
// summed.
func (s *server) rssKiB() (int64, error) {
	if s.replicas != nil {
		return sumOver(s.replicas, (*server).rssKiB)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.pid()))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no VmRSS in /proc/PID/status")
}

// memCounters are the Go runtime's cumulative allocation counters.
type memCounters struct{ bytes, objects float64 }

// scrapeMem reads go_memstats_alloc_bytes_total and go_memstats_mallocs_total
// from the server's /metrics (a balancer's replicas', summed). ok is false
// when the server has no metrics.
func (s *server) scrapeMem() (memCounters, bool, error) {
	if s.replicas != nil {
		var total memCounters
		for _, r := range s.replicas {
			m, ok, err := r.scrapeMem()
			if err != nil || !ok {
				return memCounters{}, false, err
			}
			total.bytes, total.objects = total.bytes+m.bytes, total.objects+m.objects
		}
		return total, true, nil
	}
	if s.metricsURL == "" {
		return memCounters{}, false, nil
	}
	vals, err := scrape(s.metricsURL, "go_memstats_alloc_bytes_total", "go_memstats_mallocs_total")
	if err != nil {
		return memCounters{}, false, err
	}
	b, ok1 := vals["go_memstats_alloc_bytes_total"]
	o, ok2 := vals["go_memstats_mallocs_total"]
	if !ok1 || !ok2 {
		return memCounters{}, false, fmt.Errorf("%s: go_memstats_* missing from %s", s.name, s.metricsURL)
	}
	return memCounters{bytes: b, objects: o}, true, nil
}

// The Prometheus Go collector's GC pause summary: its count is the number
// of collections, its sum their stop-the-world pauses in seconds.
const (
	gcCount = "go_gc_duration_seconds_count"
	gcSum   = "go_gc_duration_seconds_sum"
)

// scrapeGC reads the GC pause summary (a balancer's replicas', summed);
// ok is false for a server without it.
func (s *server) scrapeGC() (map[string]float64, bool) {
	if s.replicas != nil {
		total := map[string]float64{}
		for _, r := range s.replicas {
			vals, ok := r.scrapeGC()
			if !ok {
				return nil, false
			}
			for k, v := range vals {
				total[k] += v
			}
		}
		return total, true
	}
	if s.metricsURL == "" {
		return nil, false
	}
	vals, err := scrape(s.metricsURL, gcCount, gcSum)
	if err != nil || len(vals) != 2 {
		return nil, false
	}
	return vals, true
}

// scrape returns the values of the named unlabelled series on a
// Prometheus text page.
func scrape(url string, names ...string) (map[string]float64, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body, names...)
}

func parseMetrics(r io.Reader, names ...string) (map[string]float64, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok || !want[name] {
			continue
		}
		val, _, _ = strings.Cut(val, " ") // a timestamp may follow
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", name, err)
		}
		out[name] = f
	}
	return out, sc.Err()
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// pinSelf pins every thread of this process to cpu.
func pinSelf(cpu string) error {
	out, err := exec.Command("taskset", "-a", "-p", "-c", cpu, strconv.Itoa(os.Getpid())).CombinedOutput()
	if err != nil {
		return fmt.Errorf("taskset: %v: %s", err, out)
	}
	return nil
}
