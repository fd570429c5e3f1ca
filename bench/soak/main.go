// Command soak runs the real portcullis binary in --dev mode on loopback and
// sends it a fixed rate of mixed MCP traffic for a bounded time: tool calls
// and tool lists in both protocol eras, from several principals, plus
// requests that must fail authentication. It checks every response, and
// reports the error count, latency percentiles per interval, and the
// server's live heap (right after a collection it forces through
// /debug/pprof/heap?gc=1, with server.allow_pprof on), resident memory and
// goroutines (scraped from its /metrics) at the start and the end.
//
// It exits non-zero on any unexpected response, on a request the server did
// not answer in time, or on clear growth of goroutines or of the live heap.
// RSS is reported, not judged: the collector lets the heap grow to a floor
// (64 MiB) before collecting, so RSS rises early in a run without a leak.
// It is a development tool: it is not part of the portcullis binary.
//
//	go run ./bench/soak -binary bin/portcullis -duration 10m -rate 20
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// config is what the flags set.
type config struct {
	binary      string
	duration    time.Duration
	rate        float64
	interval    time.Duration
	maxRequests int
	principals  int
	timeout     time.Duration
	warmup      time.Duration
	// Growth tolerated between the start and the end.
	maxGoroutineGrowth int
	maxLiveGrowth      float64 // fraction of the start value
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.StringVar(&c.binary, "binary", "bin/portcullis", "the portcullis `binary` to run")
	fs.DurationVar(&c.duration, "duration", envDuration("SOAK_DURATION", 10*time.Minute), "how long to send traffic (env SOAK_DURATION)")
	fs.Float64Var(&c.rate, "rate", 20, "requests per second")
	fs.DurationVar(&c.interval, "interval", time.Minute, "length of one reporting interval")
	fs.IntVar(&c.maxRequests, "max-requests", 0, "stop after this many requests (0: rate × duration)")
	fs.IntVar(&c.principals, "principals", 4, "number of distinct token subjects")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "longest a request may take")
	fs.DurationVar(&c.warmup, "warmup", 0, "traffic before the start snapshot (0: one tenth of duration, at most 30s)")
	fs.IntVar(&c.maxGoroutineGrowth, "max-goroutine-growth", 25, "goroutines the server may gain from start to end")
	fs.Float64Var(&c.maxLiveGrowth, "max-live-growth", 0.5, "fraction of its start live heap the server may gain (plus 8 MiB)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.duration <= 0 || c.rate <= 0 || c.interval <= 0 || c.principals <= 0 {
		return c, errors.New("duration, rate, interval and principals must be positive")
	}
	if c.maxRequests == 0 {
		c.maxRequests = int(math.Ceil(c.rate * c.duration.Seconds()))
	}
	if c.warmup == 0 {
		c.warmup = min(c.duration/10, 30*time.Second)
	}
	return c, nil
}

func envDuration(key string, def time.Duration) time.Duration {
	if v := os.Getenv(key); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
		fmt.Fprintf(os.Stderr, "soak: %s=%q is not a duration; using %v\n", key, v, def)
	}
	return def
}

func run(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	srv, err := startServer(ctx, cfg.binary)
	if err != nil {
		return err
	}
	defer srv.kill()

	client := &http.Client{
		Timeout:   cfg.timeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute},
	}
	tokens := make([]string, cfg.principals)
	for i := range tokens {
		if tokens[i], err = devToken(ctx, client, srv, fmt.Sprintf("soak-%d", i)); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "soak: %s at %s, %g req/s for %v (at most %d requests), %d principals, warm-up %v\n",
		cfg.binary, srv.mcpURL, cfg.rate, cfg.duration, cfg.maxRequests, cfg.principals, cfg.warmup)

	st := newStats(cfg.interval)
	var start, end snapshot
	warmedUp := time.After(cfg.warmup)
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.rate))
	defer tick.Stop()
	deadline := time.After(cfg.duration)
	progress := time.NewTicker(cfg.interval)
	defer progress.Stop()
	began := time.Now()
	sem := make(chan struct{}, 128)
	var wg sync.WaitGroup
	sent := 0
loop:
	for sent < cfg.maxRequests {
		select {
		case <-ctx.Done():
			break loop
		case <-deadline:
			break loop
		case <-progress.C:
			fmt.Fprintf(out, "  %v: %d requests sent, %d unexpected answers so far\n", time.Since(began).Round(time.Second), sent, st.errorCount())
		case <-warmedUp:
			if start, err = srv.snapshot(ctx, client); err != nil {
				return err
			}
			fmt.Fprintf(out, "start (after warm-up): %s\n", start)
		case <-tick.C:
			select {
			case sem <- struct{}{}:
			default:
				st.record(time.Since(began), 0, fmt.Errorf("128 requests outstanding: the server is not keeping up"))
				continue
			}
			req := mix[sent%len(mix)]
			token := tokens[sent%len(tokens)]
			sent++
			wg.Go(func() {
				defer func() { <-sem }()
				t0 := time.Now()
				err := req.do(ctx, client, srv.mcpURL, token)
				st.record(t0.Sub(began), time.Since(t0), err)
			})
		}
	}
	wg.Wait()
	if start.rss == 0 {
		if start, err = srv.snapshot(ctx, client); err != nil {
			return err
		}
	}
	// Let the server's idle connections and finished calls settle.
	client.CloseIdleConnections()
	time.Sleep(2 * time.Second)
	if end, err = srv.snapshot(ctx, client); err != nil {
		return err
	}
	st.report(out)
	fmt.Fprintf(out, "start: %s\nend:   %s\n", start, end)

	var problems []error
	if n := st.errorCount(); n > 0 {
		problems = append(problems, fmt.Errorf("%d unexpected responses (first: %v)", n, st.firstErr))
	}
	if g := end.goroutines - start.goroutines; g > float64(cfg.maxGoroutineGrowth) {
		problems = append(problems, fmt.Errorf("goroutines grew by %.0f (%.0f → %.0f), more than %d", g, start.goroutines, end.goroutines, cfg.maxGoroutineGrowth))
	}
	if limit := start.live*(1+cfg.maxLiveGrowth) + 8<<20; end.live > limit {
		problems = append(problems, fmt.Errorf("the live heap grew from %s to %s, more than %.0f%% + 8 MiB", mib(start.live), mib(end.live), cfg.maxLiveGrowth*100))
	}
	if err := srv.stop(); err != nil {
		problems = append(problems, err)
	}
	if err := errors.Join(problems...); err != nil {
		fmt.Fprintln(out, "soak: FAIL")
		return err
	}
	fmt.Fprintln(out, "soak: PASS")
	return nil
}

// request is one kind of request in the mix.
type request struct {
	name   string
	body   string
	header map[string]string
	auth   string // "token" (the principal's), "none" or "garbage"
	status int    // the expected status
	tool   bool   // a tools/call whose result must not be an error
	// session: a whole legacy session instead (initialize, initialized,
	// a tool call, DELETE), so that sessions that are not cleaned up show
	// as growth.
	session bool
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"soak","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

func modernCall(name, args string) request {
	return request{
		name:   "2026-07-28 tools/call " + name,
		body:   `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `,` + modernMeta + `}}`,
		header: map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name},
		auth:   "token", status: http.StatusOK, tool: true,
	}
}

func legacyCall(name, args string) request {
	return request{
		name:   "2025-11-25 tools/call " + name,
		body:   `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `}}`,
		header: map[string]string{"MCP-Protocol-Version": "2025-11-25"},
		auth:   "token", status: http.StatusOK, tool: true,
	}
}

// mix is the traffic, in order, repeated: in every 11 requests, 6 tool
// calls, 2 lists, 2 auth failures and one whole legacy session.
var mix = []request{
	{name: "2025-11-25 session", session: true},
	modernCall("echo", `{"text":"soak"}`),
	{name: "2026-07-28 tools/list", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`,
		header: map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}, auth: "token", status: http.StatusOK},
	legacyCall("calculator", `{"operation":"multiply","a":6,"b":7}`),
	{name: "no token", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, header: map[string]string{"MCP-Protocol-Version": "2025-11-25"},
		auth: "none", status: http.StatusUnauthorized},
	modernCall("time", `{"timezone":"Europe/Paris"}`),
	legacyCall("whoami", `{}`),
	{name: "2025-11-25 tools/list", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		header: map[string]string{"MCP-Protocol-Version": "2025-11-25"}, auth: "token", status: http.StatusOK},
	modernCall("PingME", `{}`),
	{name: "bad token", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, header: map[string]string{"MCP-Protocol-Version": "2025-11-25"},
		auth: "garbage", status: http.StatusUnauthorized},
	legacyCall("echo", `{"text":"soak"}`),
}

func (q request) do(ctx context.Context, client *http.Client, endpoint, token string) error {
	if q.session {
		return doSession(ctx, client, endpoint, token)
	}
	_, err := q.send(ctx, client, http.MethodPost, endpoint, token)
	return err
}

// doSession runs a legacy session from initialize to DELETE.
func doSession(ctx context.Context, client *http.Client, endpoint, token string) error {
	h := map[string]string{"MCP-Protocol-Version": "2025-11-25"}
	init := request{name: "session initialize", header: h, auth: "token", status: http.StatusOK,
		body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"soak","version":"1"}}}`}
	resp, err := init.send(ctx, client, http.MethodPost, endpoint, token)
	if err != nil {
		return err
	}
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		return errors.New("session initialize: no Mcp-Session-Id")
	}
	h = map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": id}
	steps := []struct {
		method string
		q      request
	}{
		{http.MethodPost, request{name: "session initialized", header: h, auth: "token", status: http.StatusAccepted,
			body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`}},
		{http.MethodPost, request{name: "session tools/call echo", header: h, auth: "token", status: http.StatusOK, tool: true,
			body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"soak"}}}`}},
		{http.MethodDelete, request{name: "session DELETE", header: h, auth: "token", status: http.StatusNoContent}},
	}
	for _, st := range steps {
		if _, err := st.q.send(ctx, client, st.method, endpoint, token); err != nil {
			return err
		}
	}
	return nil
}

// send sends q and checks the answer.
func (q request) send(ctx context.Context, client *http.Client, method, endpoint, token string) (*http.Response, error) {
	var body io.Reader
	if q.body != "" {
		body = strings.NewReader(q.body)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range q.header {
		req.Header.Set(k, v)
	}
	switch q.auth {
	case "token":
		req.Header.Set("Authorization", "Bearer "+token)
	case "garbage":
		req.Header.Set("Authorization", "Bearer eyJhbGciOiJSUzI1NiJ9.e30.c2lnbmF0dXJl")
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q.name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: reading the response: %w", q.name, err)
	}
	if resp.StatusCode != q.status {
		return nil, fmt.Errorf("%s: status %d, want %d: %.200s", q.name, resp.StatusCode, q.status, data)
	}
	if q.status != http.StatusOK {
		return resp, nil
	}
	msg, err := lastMessage(resp.Header.Get("Content-Type"), data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q.name, err)
	}
	var m struct {
		Result *struct {
			IsError bool `json:"isError"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, fmt.Errorf("%s: %w: %.200s", q.name, err, msg)
	}
	switch {
	case m.Error != nil:
		return nil, fmt.Errorf("%s: JSON-RPC error: %s", q.name, m.Error.Message)
	case m.Result == nil:
		return nil, fmt.Errorf("%s: no result: %.200s", q.name, msg)
	case q.tool && m.Result.IsError:
		return nil, fmt.Errorf("%s: tool error: %.200s", q.name, msg)
	}
	return resp, nil
}

// lastMessage returns the JSON-RPC message of a response: the body, or the
// data of the last SSE event that carries one.
func lastMessage(contentType string, body []byte) ([]byte, error) {
	if !strings.HasPrefix(contentType, "text/event-stream") {
		return body, nil
	}
	var last []byte
	for line := range bytes.Lines(body) {
		if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:")); ok && len(bytes.TrimSpace(data)) > 0 {
			last = bytes.TrimSpace(data)
		}
	}
	if last == nil {
		return nil, errors.New("event stream without a message")
	}
	return last, nil
}

// stats collects outcomes per interval.
type stats struct {
	interval time.Duration

	mu        sync.Mutex
	intervals []*bucket
	firstErr  error
}

type bucket struct {
	latencies []time.Duration
	errors    int
}

func newStats(interval time.Duration) *stats { return &stats{interval: interval} }

func (s *stats) record(at, took time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := int(at / s.interval)
	for len(s.intervals) <= i {
		s.intervals = append(s.intervals, &bucket{})
	}
	b := s.intervals[i]
	if err != nil {
		b.errors++
		if s.firstErr == nil {
			s.firstErr = err
		}
		return
	}
	b.latencies = append(b.latencies, took)
}

func (s *stats) errorCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, b := range s.intervals {
		n += b.errors
	}
	return n
}

func (s *stats) report(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(w, "%-10s %9s %7s %9s %9s %9s\n", "interval", "requests", "errors", "p50", "p99", "max")
	var all []time.Duration
	errs := 0
	for i, b := range s.intervals {
		fmt.Fprintf(w, "%-10s %9d %7d %9s %9s %9s\n", fmt.Sprintf("%v", time.Duration(i)*s.interval),
			len(b.latencies)+b.errors, b.errors, pct(b.latencies, 50), pct(b.latencies, 99), pct(b.latencies, 100))
		all = append(all, b.latencies...)
		errs += b.errors
	}
	fmt.Fprintf(w, "%-10s %9d %7d %9s %9s %9s\n", "total", len(all)+errs, errs, pct(all, 50), pct(all, 99), pct(all, 100))
}

// pct returns the p-th percentile of ds (nearest rank), rounded.
func pct(ds []time.Duration, p float64) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(i, 0)].Round(10 * time.Microsecond).String()
}

// snapshot is the server's resource use at one moment.
type snapshot struct {
	live, rss, goroutines float64
}

func (s snapshot) String() string {
	return fmt.Sprintf("live heap %s, RSS %s, goroutines %.0f", mib(s.live), mib(s.rss), s.goroutines)
}

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

// server is the portcullis process under test.
type server struct {
	cmd        *exec.Cmd
	base       string // http://127.0.0.1:PORT
	mcpURL     string
	metricsURL string
	done       chan struct{}
	err        error
}

// startServer runs `binary serve --dev` on loopback ports and waits for
// both listeners.
func startServer(ctx context.Context, binary string) (*server, error) {
	cmd := exec.Command(binary, "serve", "--dev", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0")
	// Only the variables the server needs: it rejects unknown PORTCULLIS_*
	// keys, and OTEL_* would send traces somewhere.
	// allow_pprof: snapshot forces a collection through /debug/pprof/heap.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "PORTCULLIS_SERVER_ALLOW_PPROF=true"}
	cmd.Stdout = io.Discard
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w (run make build first)", binary, err)
	}
	s := &server{cmd: cmd, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			var rec struct{ Msg, Level, Listener, Addr, URL string }
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			if rec.Level == "ERROR" || rec.Level == "WARN" {
				fmt.Fprintln(os.Stderr, "server:", line)
			}
			if rec.Msg == "listening" {
				if rec.Listener == "metrics" {
					s.metricsURL = rec.URL
				} else {
					s.base, s.mcpURL = "http://"+rec.Addr, rec.URL
				}
				if !signalled && s.metricsURL != "" && s.mcpURL != "" {
					signalled = true
					close(ready)
				}
			}
		}
		s.err = cmd.Wait()
		close(s.done)
	}()
	select {
	case <-ready:
	case <-s.done:
		return nil, fmt.Errorf("%s exited before listening: %v", binary, s.err)
	case <-time.After(30 * time.Second):
		s.kill()
		return nil, errors.New("the server did not listen within 30s")
	case <-ctx.Done():
		s.kill()
		return nil, ctx.Err()
	}
	for _, u := range []string{s.mcpURL, s.metricsURL} {
		if err := loopbackOnly(u); err != nil {
			s.kill()
			return nil, err
		}
	}
	return s, nil
}

// loopbackOnly refuses to soak anything but a loopback address.
func loopbackOnly(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s is not a loopback address: the soak only runs on loopback", raw)
	}
	return nil
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		if s.err != nil {
			return fmt.Errorf("server exited with %v after SIGTERM", s.err)
		}
		return nil
	case <-time.After(30 * time.Second):
		s.kill()
		return errors.New("server did not exit within 30s of SIGTERM")
	}
}

func (s *server) kill() {
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func devToken(ctx context.Context, client *http.Client, s *server, clientID string) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "resource": {s.mcpURL}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/dev-issuer/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("dev token: %w", err)
	}
	defer resp.Body.Close()
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || tr.AccessToken == "" {
		return "", fmt.Errorf("dev token: status %d: %v", resp.StatusCode, err)
	}
	return tr.AccessToken, nil
}

// snapshot forces a collection (a heap profile with gc=1, which
// server.allow_pprof serves on the metrics listener), then scrapes the live
// heap (go_memstats_heap_alloc_bytes right after it), RSS and goroutines
// from /metrics.
func (s *server) snapshot(ctx context.Context, client *http.Client) (snapshot, error) {
	gc, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(s.metricsURL, "/metrics")+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return snapshot{}, err
	}
	gresp, err := client.Do(gc)
	if err != nil {
		return snapshot{}, fmt.Errorf("forcing a collection: %w", err)
	}
	io.Copy(io.Discard, gresp.Body)
	gresp.Body.Close()
	if gresp.StatusCode != http.StatusOK {
		return snapshot{}, fmt.Errorf("forcing a collection: /debug/pprof/heap: %s", gresp.Status)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.metricsURL, nil)
	if err != nil {
		return snapshot{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return snapshot{}, fmt.Errorf("scraping %s: %w", s.metricsURL, err)
	}
	defer resp.Body.Close()
	want := map[string]*float64{}
	var snap snapshot
	want["process_resident_memory_bytes"] = &snap.rss
	want["go_memstats_heap_alloc_bytes"] = &snap.live
	want["go_goroutines"] = &snap.goroutines
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	found := 0
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if p, hit := want[name]; ok && hit {
			if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
				*p = v
				found++
			}
		}
	}
	if found != len(want) {
		return snap, fmt.Errorf("scraping %s: found %d of the series %v", s.metricsURL, found, slices.Sorted(maps.Keys(want)))
	}
	return snap, nil
}
