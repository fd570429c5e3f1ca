package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// row is one measured (server, path, concurrency) combination.
type row struct {
	server       string
	path         string
	conc         int
	requests     int64
	elapsed      time.Duration
	p50, p99     time.Duration
	cpuTicks     int64
	allocBytes   float64 // per request; NaN-free only when mem is true
	allocObjects float64
	mem          bool    // allocation counters were read
	gcs, gcPause float64 // collections and their total stop-the-world pause (s) during the row
	gc           bool    // the GC counters were read (Portcullis only)
	rssKiB       int64
	wrong        int64
	upCPUTicks   int64 // CPU of the server's upstream during the row
	up           bool  // the server proxies to an upstream (upCPUTicks was read)
	// CPU of the Redis that keeps the server's sessions, and of the
	// balancer in front of its replicas, during the row (0 for none).
	storeCPUTicks, lbCPUTicks int64
}

func (r row) rps() float64 { return float64(r.requests) / r.elapsed.Seconds() }

// cpuPerReq is server CPU time per request, in microseconds.
func (r row) cpuPerReq() float64 { return perReq(r.cpuTicks, r.requests) }

// upCPUPerReq is the upstream's CPU time per request, in microseconds.
func (r row) upCPUPerReq() float64 { return perReq(r.upCPUTicks, r.requests) }

// storeCPUPerReq is Redis's CPU time per request, in microseconds.
func (r row) storeCPUPerReq() float64 { return perReq(r.storeCPUTicks, r.requests) }

// lbCPUPerReq is the balancer's CPU time per request, in microseconds.
func (r row) lbCPUPerReq() float64 { return perReq(r.lbCPUTicks, r.requests) }

// perReq is ticks of CPU time per request, in microseconds.
func perReq(ticks, requests int64) float64 {
	return float64(ticks) * 1e6 / clockTicks / float64(requests)
}

// report is everything one run measured.
type report struct {
	cfg     *config
	machine string
	version string
	rows    []row
	idleRSS map[string]int64
	loadRSS map[string]int64
	// idle legacy sessions in a fresh Portcullis, without a session store
	// and with its sessions in Redis
	sess, sessRedis idleSessions
	// rebuilt is how many sessions the replicas behind the balancer
	// rebuilt over the run (rebuiltKnown: it was read).
	rebuilt      float64
	rebuiltKnown bool
	startups     []time.Duration
	noMetrics    bool
	spanPosts    int64
	spanBytes    int64
	badSpanPosts int64
}

// settle is how long a server is left idle before its RSS is read.
func (h *harness) settle() time.Duration {
	if h.cfg.smoke {
		return 200 * time.Millisecond
	}
	return time.Second
}

func (h *harness) measure(ctx context.Context) (*report, error) {
	rep := &report{cfg: h.cfg, machine: machineInfo(), idleRSS: map[string]int64{}, loadRSS: map[string]int64{}}
	if out, err := exec.Command(h.cfg.portcullis, "version").Output(); err == nil {
		rep.version = strings.TrimSpace(string(out))
	}
	ref, err := h.startRef(ctx)
	if err != nil {
		return nil, err
	}
	defer ref.stop()
	mg, err := h.startMCPGo(ctx)
	if err != nil {
		return nil, err
	}
	defer mg.stop()
	ts, err := h.startTS(ctx)
	if err != nil {
		return nil, err
	}
	defer ts.stop()
	pc, _, err := h.startPortcullis(ctx, "portcullis", false)
	if err != nil {
		return nil, err
	}
	defer pc.stop()
	pv, err := h.startVirtual(ctx)
	if err != nil {
		return nil, err
	}
	defer pv.stop()
	pp, _, err := h.startPortcullisWith(ctx, pcOptions{name: stockName, bin: h.cfg.stock})
	if err != nil {
		return nil, err
	}
	defer pp.stop()
	up, pu, err := h.startUpstream(ctx)
	if err != nil {
		return nil, err
	}
	defer up.stop()
	defer pu.stop()
	rdb, err := h.startRedis(ctx)
	if err != nil {
		return nil, err
	}
	defer rdb.stop()
	pr, err := h.startRedisRow(ctx, redisRowName, rdb)
	if err != nil {
		return nil, err
	}
	defer pr.stop()
	pm, err := h.startRedisRow(ctx, redisMemoryRowName, rdb)
	if err != nil {
		return nil, err
	}
	defer pm.stop()
	pa, err := h.startReplicas(ctx, affinityRowName, rdb, true)
	if err != nil {
		return nil, err
	}
	defer pa.stop()
	prs, err := h.startReplicas(ctx, replicasRowName, rdb, false)
	if err != nil {
		return nil, err
	}
	defer prs.stop()
	if _, _, err := pc.scrapeMem(); err != nil {
		h.logf("Portcullis serves no metrics (%v): its bytes and allocations per request are not reported", err)
		for _, s := range slices.Concat([]*server{pc, pv, pp, pu, pr, pm}, pa.replicas, prs.replicas) {
			s.metricsURL = ""
		}
		rep.noMetrics = true
	}
	if h.tokens, err = h.mintTokens(pc.base+"/mcp", slices.Max(h.cfg.conc)); err != nil {
		return nil, err
	}
	if pp.tokens, err = h.mintTokens(pp.base+"/mcp", slices.Max(h.cfg.conc)); err != nil {
		return nil, err
	}
	for _, s := range []*server{pv, pu, pr, pm, pa, prs} {
		if s.tokens, err = h.mintTokens(s.endpoint(), slices.Max(h.cfg.conc)); err != nil {
			return nil, err
		}
	}
	time.Sleep(h.settle())
	servers := []*server{ref, mg, ts, pc, pv, pp, up, pu, pr, pm, pa, prs}
	for _, s := range servers {
		if rep.idleRSS[s.name], err = s.rssKiB(); err != nil {
			return nil, err
		}
	}
	for _, path := range h.cfg.paths {
		for _, conc := range h.cfg.conc {
			for _, s := range servers {
				if len(h.cfg.only) > 0 && !slices.Contains(h.cfg.only, s.name) || s.paths != nil && !slices.Contains(s.paths, path) {
					continue
				}
				r, err := h.row(ctx, s, path, conc)
				if err != nil {
					return nil, err
				}
				h.logf("%-10s %s c=%-3d %8.0f req/s  p50 %6.2f ms  p99 %6.2f ms  %6.1f µs CPU/req  wrong %d",
					s.name, path, conc, r.rps(), ms(r.p50), ms(r.p99), r.cpuPerReq(), r.wrong)
				rep.rows = append(rep.rows, r)
			}
		}
	}
	for _, s := range servers {
		if rep.loadRSS[s.name], err = s.rssKiB(); err != nil {
			return nil, err
		}
	}
	if _, ok := rep.find(replicasRowName, pathLegacy, h.cfg.conc[0]); ok && !rep.noMetrics {
		if rep.rebuilt, err = prs.rebuilt(); err != nil {
			return nil, err
		}
		rep.rebuiltKnown = true
	}
	// SIGTERM flushes the spans still batched in the exporter.
	if err := errors.Join(ref.stop(), mg.stop(), ts.stop(), pc.stop(), pv.stop(), pp.stop(), pu.stop(), up.stop(), pr.stop(), pm.stop(), pa.stop(), prs.stop(), rdb.stop()); err != nil {
		return nil, err
	}
	rep.spanPosts, rep.spanBytes, rep.badSpanPosts = h.sink.requests.Load(), h.sink.bytes.Load(), h.sink.bad.Load()

	if h.cfg.sessions > 0 {
		if rep.sess, err = h.sessionMemory(ctx, false); err != nil {
			return nil, err
		}
		if rep.sessRedis, err = h.sessionMemory(ctx, true); err != nil {
			return nil, err
		}
	}
	for range h.cfg.startups {
		s, d, err := h.startPortcullis(ctx, "portcullis-dev", true)
		if err != nil {
			return nil, err
		}
		if err := s.stop(); err != nil {
			return nil, err
		}
		rep.startups = append(rep.startups, d)
	}
	return rep, nil
}

// row measures one server on one path at one concurrency.
func (h *harness) row(ctx context.Context, s *server, path string, conc int) (row, error) {
	client := newHTTPClient(conc)
	defer client.CloseIdleConnections()
	where := fmt.Sprintf("%s %s c=%d", s.name, path, conc)
	tokens := s.tokens
	if tokens == nil {
		tokens = h.tokens
	}
	ws := make([]*worker, conc)
	for i := range ws {
		ws[i] = &worker{idx: i, client: client, url: s.endpoint(), auth: "Bearer " + tokens[i], path: path, version: s.modernVersion, tool: s.tool}
	}
	if err := parallel(ws, func(w *worker) error { return w.setup(ctx) }); err != nil {
		h.fail.add(where, err)
		return row{}, fmt.Errorf("%s: %w", where, err)
	}
	wrong0 := h.fail.count()
	if h.cfg.smoke {
		phase(ctx, ws, time.Time{}, max(1, 50/conc), nil, h.fail, where)
	} else {
		phase(ctx, ws, time.Now().Add(h.cfg.warmup), 0, nil, h.fail, where)
	}
	cpu0, err := s.cpuTicks()
	if err != nil {
		return row{}, err
	}
	up0, st0, lb0, err := s.sideTicks()
	if err != nil {
		return row{}, err
	}
	mem0, memOK, err := s.scrapeMem()
	if err != nil {
		return row{}, err
	}
	gc0, gcOK := s.scrapeGC()
	var prof <-chan error
	if h.cfg.profileDir != "" && (s.name == "portcullis" || s.name == virtualRowName || s.name == stockName || s.name == proxiedName || s.name == redisRowName || s.name == redisMemoryRowName) {
		prof = h.profile(ctx, s, path, conc)
	}
	lat := make([][]time.Duration, conc)
	start := time.Now()
	var n int64
	if h.cfg.smoke {
		n = phase(ctx, ws, time.Time{}, max(1, h.cfg.smokeRequests/conc), lat, h.fail, where)
	} else {
		n = phase(ctx, ws, start.Add(h.cfg.duration), 0, lat, h.fail, where)
	}
	elapsed := time.Since(start)
	if prof != nil {
		if err := <-prof; err != nil {
			return row{}, fmt.Errorf("%s: profile: %w", where, err)
		}
	}
	cpu1, err := s.cpuTicks()
	if err != nil {
		return row{}, err
	}
	up1, st1, lb1, err := s.sideTicks()
	if err != nil {
		return row{}, err
	}
	mem1, _, err := s.scrapeMem()
	if err != nil {
		return row{}, err
	}
	gc1, gcOK1 := s.scrapeGC()
	if err := ctx.Err(); err != nil {
		return row{}, err
	}
	if err := parallel(ws, func(w *worker) error { return w.teardown(ctx) }); err != nil {
		h.fail.add(where, err)
	}
	rss, err := s.rssKiB()
	if err != nil {
		return row{}, err
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	r := row{server: s.name, path: path, conc: conc, requests: n, elapsed: elapsed, cpuTicks: cpu1 - cpu0,
		mem: memOK, rssKiB: rss, wrong: h.fail.count() - wrong0, up: s.upstream != nil, upCPUTicks: up1 - up0,
		storeCPUTicks: st1 - st0, lbCPUTicks: lb1 - lb0}
	if len(all) > 0 {
		r.p50 = all[(len(all)-1)*50/100]
		r.p99 = all[(len(all)-1)*99/100]
	}
	if gcOK && gcOK1 {
		r.gc, r.gcs, r.gcPause = true, gc1[gcCount]-gc0[gcCount], gc1[gcSum]-gc0[gcSum]
	}
	if memOK && n > 0 {
		r.allocBytes = (mem1.bytes - mem0.bytes) / float64(n)
		r.allocObjects = (mem1.objects - mem0.objects) / float64(n)
	}
	return r, nil
}

// sideTicks returns the CPU ticks of the processes besides s that serve
// its rows: its upstream, its Redis and its balancer (0 for each it has
// not).
func (s *server) sideTicks() (up, store, lb int64, err error) {
	up, err1 := s.upstream.cpuTicks()
	store, err2 := s.store.cpuTicks()
	lb, err3 := s.balancer.cpuTicks()
	return up, store, lb, errors.Join(err1, err2, err3)
}

// profile takes a CPU profile and an allocation profile (the allocations
// made during the window, /debug/pprof/allocs?seconds=N) of s over the
// measured part of a row, and an execution trace of its first second, from
// its /debug/pprof (-profile turns server.allow_pprof on) and writes them
// to cfg.profileDir as cpu-SERVER-PATH-cCONC[-pinned].pprof, allocs-… and
// trace-SERVER-PATH-cCONC[-pinned].out. The returned channel yields the
// outcome once all three are written.
func (h *harness) profile(ctx context.Context, s *server, path string, conc int) <-chan error {
	secs := max(1, int(h.cfg.duration/time.Second))
	suffix := fmt.Sprintf("%s-%s-c%d.pprof", s.name, path, conc)
	if h.cfg.pin {
		suffix = fmt.Sprintf("%s-%s-c%d-pinned.pprof", s.name, path, conc)
	}
	base := strings.TrimSuffix(s.metricsURL, "/metrics") + "/debug/pprof/"
	q := "?seconds=" + strconv.Itoa(secs)
	traceName := "trace-" + strings.TrimSuffix(suffix, ".pprof") + ".out"
	errs := make(chan error, 3)
	go func() { errs <- download(ctx, base+"profile"+q, filepath.Join(h.cfg.profileDir, "cpu-"+suffix)) }()
	go func() { errs <- download(ctx, base+"allocs"+q, filepath.Join(h.cfg.profileDir, "allocs-"+suffix)) }()
	go func() { errs <- download(ctx, base+"trace?seconds=1", filepath.Join(h.cfg.profileDir, traceName)) }()
	done := make(chan error, 1)
	go func() { done <- errors.Join(<-errs, <-errs, <-errs) }()
	return done
}

// download writes the body of a successful GET of url to the file path.
func download(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// idleSessions is what a fresh Portcullis holds with idle legacy sessions.
type idleSessions struct {
	n         int
	idleRSS   int64   // fresh process
	baseRSS   int64   // after the first live-heap probe, before the sessions
	rss       int64   // with the sessions
	liveBytes float64 // live heap growth with the sessions
	// redisBytes is the growth of Redis's used_memory with the sessions,
	// when they are kept there.
	redisBytes int64
}

// rssKiB is the RSS growth per idle session.
func (s idleSessions) rssKiB() float64 {
	if s.n == 0 {
		return 0
	}
	return float64(s.rss-s.baseRSS) / float64(s.n)
}

// liveKiB is the live-heap growth per idle session.
func (s idleSessions) liveKiB() float64 {
	if s.n == 0 {
		return 0
	}
	return s.liveBytes / 1024 / float64(s.n)
}

// redisKiB is Redis's memory growth per idle session.
func (s idleSessions) redisKiB() float64 {
	if s.n == 0 {
		return 0
	}
	return float64(s.redisBytes) / 1024 / float64(s.n)
}

// sessionMemory starts a fresh Portcullis (with inRedis, and a fresh Redis
// that keeps its sessions), reads its idle RSS, opens cfg.sessions legacy
// sessions (initialize + initialized) and leaves them idle, then reads RSS
// again. RSS also holds garbage not yet collected, so it measures the live
// heap too, right after a collection, before and after; and Redis's
// used_memory.
func (h *harness) sessionMemory(ctx context.Context, inRedis bool) (idleSessions, error) {
	var out idleSessions
	o := pcOptions{name: "portcullis-sessions"}
	var rdb *server
	if inRedis {
		var err error
		if rdb, err = h.startRedis(ctx); err != nil {
			return out, err
		}
		defer rdb.stop()
		o.name, o.redisURL = "portcullis-sessions-redis", "redis://"+rdb.addr()+"/0"
	}
	s, _, err := h.startPortcullisWith(ctx, o)
	if err != nil {
		return out, err
	}
	defer s.stop()
	time.Sleep(h.settle())
	if out.idleRSS, err = s.rssKiB(); err != nil {
		return out, err
	}
	const conc = 8
	tokens, err := h.mintTokens(s.base+"/mcp", conc)
	if err != nil {
		return out, err
	}
	client := newHTTPClient(conc)
	defer client.CloseIdleConnections()
	ws := make([]*worker, conc)
	for i := range ws {
		ws[i] = &worker{idx: i, client: client, url: s.base + "/mcp", auth: "Bearer " + tokens[i], path: pathLegacy}
	}
	probe := &worker{idx: conc, client: client, url: s.base + "/mcp", auth: "Bearer " + tokens[0], path: pathModern}
	live0, err := liveHeap(ctx, s, probe)
	if err != nil {
		return out, err
	}
	if out.baseRSS, err = s.rssKiB(); err != nil {
		return out, err
	}
	var redis0 int64
	if rdb != nil {
		if redis0, err = redisUsedMemory(ctx, rdb); err != nil {
			return out, err
		}
	}
	per := (h.cfg.sessions + conc - 1) / conc
	err = parallel(ws, func(w *worker) error {
		for range per {
			if err := w.setup(ctx); err != nil {
				return err
			}
			if w.session == "" {
				return errors.New("initialize returned no Mcp-Session-Id")
			}
		}
		return nil
	})
	if err != nil {
		h.fail.add(o.name, err)
		return out, fmt.Errorf("%s: opening sessions: %w", o.name, err)
	}
	out.n = per * conc
	time.Sleep(h.settle())
	if out.rss, err = s.rssKiB(); err != nil {
		return out, err
	}
	live1, err := liveHeap(ctx, s, probe)
	if err != nil {
		return out, err
	}
	out.liveBytes = live1 - live0
	if rdb != nil {
		redis1, err := redisUsedMemory(ctx, rdb)
		if err != nil {
			return out, err
		}
		out.redisBytes = redis1 - redis0
	}
	return out, nil
}

// liveHeap returns the server's live heap plus goroutine stacks: it sends
// echo calls one at a time until go_gc_duration_seconds_count moves, lets
// the background sweeper finish (heap_alloc counts unswept garbage), then
// reads go_memstats_heap_alloc_bytes (the live heap plus at most one call's
// garbage) and go_memstats_stack_inuse_bytes.
func liveHeap(ctx context.Context, s *server, w *worker) (float64, error) {
	const gcs, heap, stacks = "go_gc_duration_seconds_count", "go_memstats_heap_alloc_bytes", "go_memstats_stack_inuse_bytes"
	m, err := scrape(s.metricsURL, gcs)
	if err != nil {
		return 0, err
	}
	start := m[gcs]
	for range 100000 {
		if err := w.call(ctx); err != nil {
			return 0, fmt.Errorf("probe call: %w", err)
		}
		if m, err = scrape(s.metricsURL, gcs); err != nil {
			return 0, err
		}
		if m[gcs] > start {
			time.Sleep(200 * time.Millisecond)
			if m, err = scrape(s.metricsURL, heap, stacks); err != nil {
				return 0, err
			}
			return m[heap] + m[stacks], nil
		}
	}
	return 0, errors.New("no garbage collection after 100000 calls")
}

// parallel runs f for every worker at once and joins the errors.
func parallel(ws []*worker, f func(*worker) error) error {
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(w) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func machineInfo() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%d × %s, Linux %s, %s", runtime.NumCPU(), model, strings.TrimSpace(string(kernel)), runtime.Version())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
