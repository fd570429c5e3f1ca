package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The targets a load run is measured against: Portcullis's throughput on
// the 2026-07-28 path at c=16 as a multiple of each peer's, its server CPU
// per call there, and the rest.
const (
	targetRatioGoSDK = 2.0
	targetRatioMCPGo = 0.8
	targetRatioTS    = 6.0
	targetCPUPerCall = 90.0 // µs
	targetP99        = 5 * time.Millisecond
	targetIdleRSSKiB = 20 << 10
	targetSessionKiB = 20
	targetStartup    = 100 * time.Millisecond
)

// stockName is the row name of Portcullis built on the SDK as released
// (make build-stock), as `go install` and library users get it; the
// "portcullis" row is the shipped build (make build: patches/go-sdk).
const stockName = "portcullis-stock"

// The upstream rows: a reference server called directly, and Portcullis
// (full stack) proxying the same calls to it as an HTTP upstream.
const (
	upstreamName = "upstream"
	proxiedName  = "portcullis-upstream"
)

// Goals of the upstream rows (issue 26, "a hop that costs about a hop"),
// on the 2026-07-28 path: the p50 latency Portcullis adds at c=1, its CPU
// per proxied call (full stack), and the share of the upstream's direct
// throughput kept at c=16 through Portcullis on the shared core.
const (
	targetAddedP50    = 150 * time.Microsecond
	targetProxiedCPU  = 120 // µs
	targetKeptThrough = 0.70
)

// peers are the bare servers Portcullis is compared with, by row name.
var peers = []struct{ name, label string }{
	{"refserver", "go-sdk"},
	{"mcp-go", "mcp-go"},
	{"ts-sdk", "ts-sdk"},
}

// label is a row's server name as the report shows it.
func label(server string) string {
	switch server {
	case "refserver":
		return "ref (go-sdk)"
	case upstreamName:
		return "upstream direct"
	case proxiedName:
		return "portcullis → upstream"
	case virtualRowName:
		return "portcullis, virtual server " + virtualPath
	case redisRowName:
		return "portcullis, sessions in Redis"
	case redisMemoryRowName:
		return "portcullis, Redis rate buckets, sessions in memory"
	case replicasRowName:
		return "3 × portcullis behind HAProxy, sessions in Redis"
	case affinityRowName:
		return "3 × portcullis behind HAProxy, affinity, sessions in memory"
	}
	return server
}

func (rep *report) find(server, path string, conc int) (row, bool) {
	for _, r := range rep.rows {
		if r.server == server && r.path == path && r.conc == conc {
			return r, true
		}
	}
	return row{}, false
}

func (rep *report) medianStartup() time.Duration {
	if len(rep.startups) == 0 {
		return 0
	}
	s := slices.Clone(rep.startups)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func mib(kib int64) string { return fmt.Sprintf("%.1f", float64(kib)/1024) }

func yes(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func (rep *report) markdown() string {
	var b strings.Builder
	c := rep.cfg
	pin := "not pinned (servers and client share the machine's CPUs)"
	if c.pin {
		pin = "pinned: server on CPU " + serverCPU + ", load client on CPU " + clientCPU
	}
	mode := fmt.Sprintf("%s measured per row after %s of warm-up", c.duration, c.warmup)
	if c.smoke {
		mode = fmt.Sprintf("smoke mode: about %d requests per row", c.smokeRequests)
	}
	fmt.Fprintf(&b, "### Load test: bare go-sdk (ref), mcp-go and TypeScript SDK vs Portcullis full stack (%s)\n\n", map[bool]string{true: "pinned", false: "unpinned"}[c.pin])
	fmt.Fprintf(&b, "- %s, %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), rep.machine)
	fmt.Fprintf(&b, "- %s; %s\n", pin, mode)
	fmt.Fprintf(&b, "- ref: bare go-sdk v1.8.0 stateless StreamableHTTPHandler, echo tool only (it keeps no sessions, so on the 2025-11-25 path it answers the same requests statelessly)")
	if len(c.refEnv) > 0 {
		fmt.Fprintf(&b, "; env %s", strings.Join(c.refEnv, " "))
	}
	b.WriteString("\n")
	b.WriteString("- mcp-go: bare github.com/mark3labs/mcp-go v1.2.1 StreamableHTTPServer, stateless, echo tool only (bench/peers/mcpgo)\n")
	b.WriteString("- ts-sdk: @modelcontextprotocol/sdk 1.32.2 StreamableHTTPServerTransport, stateless (a server and transport per request, as in its stateless example), echo tool only, Node 22 (bench/peers/ts); it knows no 2026-07-28, so on that path it gets the same request declared as 2025-11-25; it has no Go counters (n/a)\n")
	b.WriteString("- upstream direct: a second ref, called directly; portcullis → upstream: Portcullis, same configuration, with that ref as its Streamable HTTP upstream `ref`, the calls going to `ref_echo` (its CPU is Portcullis's alone; the upstream's CPU over the same row is shown next to it)\n")
	fmt.Fprintf(&b, "- portcullis, virtual server %s: a second Portcullis, same configuration plus a virtual server at %s exposing echo as `%s` (renamed, described, its argument described; no argument fixed: echo's only one is the text it answers), called there with the same requests and a token for that server's resource\n", virtualPath, virtualPath, virtualTool)
	b.WriteString("- portcullis-stock: the same source and configuration built on go-sdk v1.8.0 as released (make build-stock), as `go install` and library users get it; portcullis is the shipped build (make build, the image: the SDK with patches/go-sdk applied)\n")
	fmt.Fprintf(&b, "- portcullis: %s; JWT auth (RS256 and ES256 tokens, one per worker, keys by discovery), required scope + per-tool policy, request limits (set above the load), metrics, OTLP/HTTP traces to a local sink, access and audit logs to a file", rep.version)
	if len(c.env) > 0 {
		fmt.Fprintf(&b, "; env %s", strings.Join(c.env, " "))
	}
	b.WriteString("\n")
	if rep.noMetrics {
		b.WriteString("- this Portcullis build serves no /metrics, so its bytes and allocations per request are not shown\n")
	} else {
		fmt.Fprintf(&b, "- OTLP sink received %d trace export requests (%d KiB)\n", rep.spanPosts, rep.spanBytes>>10)
	}
	b.WriteString("\n| path | conc | server | req/s | p50 ms | p99 ms | CPU µs/req | KiB/req | allocs/req | RSS MiB | req/s ×ref | CPU ×ref |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rep.rows {
		kib, allocs := "n/a", "n/a"
		if r.mem {
			kib, allocs = fmt.Sprintf("%.1f", r.allocBytes/1024), fmt.Sprintf("%.0f", r.allocObjects)
		}
		ratio, cpuRatio := "", ""
		if r.server != "refserver" {
			if ref, ok := rep.find("refserver", r.path, r.conc); ok {
				ratio = fmt.Sprintf("%.2f", r.rps()/ref.rps())
				if ref.cpuTicks > 0 {
					cpuRatio = fmt.Sprintf("%.2f", r.cpuPerReq()/ref.cpuPerReq())
				}
			}
		}
		name := label(r.server)
		fmt.Fprintf(&b, "| %s | %d | %s | %.0f | %.2f | %.2f | %.0f | %s | %s | %s | %s | %s |\n",
			r.path, r.conc, name, r.rps(), ms(r.p50), ms(r.p99), r.cpuPerReq(), kib, allocs, mib(r.rssKiB), ratio, cpuRatio)
	}
	rep.upstreamTable(&b)
	rep.virtualTable(&b)
	rep.replicasTable(&b)
	b.WriteString("\n| collections during the row | conc | server | calls per collection | STW pause per collection, µs | STW pause per call, µs |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|\n")
	for _, r := range rep.rows {
		if !r.gc || r.gcs == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %.0f | %.0f | %.2f |\n", r.path, r.conc, label(r.server),
			float64(r.requests)/r.gcs, r.gcPause/r.gcs*1e6, r.gcPause/float64(r.requests)*1e6)
	}
	b.WriteString("\n| req/s ÷ peer's req/s | conc | portcullis ÷ go-sdk | ÷ mcp-go | ÷ ts-sdk | portcullis-stock ÷ go-sdk | ÷ mcp-go | ÷ ts-sdk |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, path := range c.paths {
		for _, conc := range c.conc {
			fmt.Fprintf(&b, "| %s | %d |", path, conc)
			for _, us := range []string{"portcullis", stockName} {
				u, ok := rep.find(us, path, conc)
				for _, p := range peers {
					v := " – |"
					if pr, ok2 := rep.find(p.name, path, conc); ok && ok2 && pr.rps() > 0 {
						v = fmt.Sprintf(" %.2f |", u.rps()/pr.rps())
					}
					b.WriteString(v)
				}
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\n| memory and startup | ref (go-sdk) | mcp-go | ts-sdk | portcullis | portcullis-stock |\n|---|---:|---:|---:|---:|---:|\n")
	names := []string{"refserver", "mcp-go", "ts-sdk", "portcullis", stockName}
	b.WriteString("| RSS idle, MiB |")
	for _, n := range names {
		fmt.Fprintf(&b, " %s |", mib(rep.idleRSS[n]))
	}
	b.WriteString("\n| RSS after the load above, MiB |")
	for _, n := range names {
		fmt.Fprintf(&b, " %s |", mib(rep.loadRSS[n]))
	}
	b.WriteString("\n")
	for _, t := range []struct {
		s     idleSessions
		where string
	}{{rep.sess, ""}, {rep.sessRedis, ", sessions in Redis"}} {
		if t.s.n == 0 {
			continue
		}
		fmt.Fprintf(&b, "| fresh process%s: RSS idle → before → with %d idle 2025-11-25 sessions, MiB | | | | %s → %s → %s (%.1f KiB per session) | |\n",
			t.where, t.s.n, mib(t.s.idleRSS), mib(t.s.baseRSS), mib(t.s.rss), t.s.rssKiB())
		fmt.Fprintf(&b, "| live heap (after a GC) + goroutine stacks per idle session%s, KiB | | | | %.1f | |\n", t.where, t.s.liveKiB())
	}
	if rep.sessRedis.n > 0 {
		fmt.Fprintf(&b, "| Redis used_memory per idle session, KiB | | | | %.1f | |\n", rep.sessRedis.redisKiB())
	}
	if len(rep.startups) > 0 {
		fmt.Fprintf(&b, "| start to ready (`serve --dev`, /readyz 200), median of %d | | | | %.1f ms (max %.1f ms) | |\n",
			len(rep.startups), ms(rep.medianStartup()), ms(slices.Max(rep.startups)))
	}
	b.WriteString("\n| target (2026-07-28, c=16, full stack) | portcullis (shipped) | | portcullis-stock |\n|---|---|---|---|\n")
	note := ""
	if !c.pin {
		note = " (the targets are for the pinned run)"
	}
	pc, ok1 := rep.find("portcullis", pathModern, 16)
	pp, ok2 := rep.find(stockName, pathModern, 16)
	if ok1 && ok2 {
		for _, t := range []struct {
			peer, label string
			want        float64
		}{{"refserver", "go-sdk", targetRatioGoSDK}, {"mcp-go", "mcp-go", targetRatioMCPGo}, {"ts-sdk", "ts-sdk", targetRatioTS}} {
			if pr, ok := rep.find(t.peer, pathModern, 16); ok && pr.rps() > 0 {
				a, p := pc.rps()/pr.rps(), pp.rps()/pr.rps()
				fmt.Fprintf(&b, "| req/s ≥ %.1f× bare %s%s | %.2f× | %s | %.2f× |\n", t.want, t.label, note, a, yes(a >= t.want), p)
			}
		}
		fmt.Fprintf(&b, "| server CPU ≤ %.0f µs per call | %.0f µs | %s | %.0f µs |\n", targetCPUPerCall, pc.cpuPerReq(), yes(pc.cpuPerReq() <= targetCPUPerCall), pp.cpuPerReq())
		fmt.Fprintf(&b, "| p99 ≤ %s | %.2f ms | %s | %.2f ms |\n", targetP99, ms(pc.p99), yes(pc.p99 <= targetP99), ms(pp.p99))
	}
	idle := rep.idleRSS["portcullis"]
	fmt.Fprintf(&b, "| idle RSS ≤ %d MiB | %s MiB | %s | %s MiB |\n", targetIdleRSSKiB>>10, mib(idle), yes(idle <= targetIdleRSSKiB), mib(rep.idleRSS[stockName]))
	if rep.sess.n > 0 {
		fmt.Fprintf(&b, "| ≤ %d KiB per idle legacy session (RSS) | %.1f KiB | %s | |\n", targetSessionKiB, rep.sess.rssKiB(), yes(rep.sess.rssKiB() <= targetSessionKiB))
		fmt.Fprintf(&b, "| ≤ %d KiB per idle legacy session (live heap + stacks) | %.1f KiB | %s | |\n", targetSessionKiB, rep.sess.liveKiB(), yes(rep.sess.liveKiB() <= targetSessionKiB))
	}
	if len(rep.startups) > 0 {
		fmt.Fprintf(&b, "| start to ready ≤ %s | %.1f ms | %s | |\n", targetStartup, ms(rep.medianStartup()), yes(rep.medianStartup() <= targetStartup))
	}
	return b.String()
}

// upstreamTable writes the upstream rows side by side: the latency
// Portcullis adds to a call it proxies, and its CPU per proxied call next
// to the upstream's own, called directly and (read over the proxied row)
// through Portcullis. The CPU goal compares with the direct row.
func (rep *report) upstreamTable(b *strings.Builder) {
	var lines []string
	for _, path := range rep.cfg.paths {
		for _, conc := range rep.cfg.conc {
			d, ok1 := rep.find(upstreamName, path, conc)
			p, ok2 := rep.find(proxiedName, path, conc)
			if !ok1 || !ok2 {
				continue
			}
			lines = append(lines, fmt.Sprintf("| %s | %d | %.3f | %.3f | %+.3f | %.0f | %.0f | %.0f | %.2f |\n",
				path, conc, ms(d.p50), ms(p.p50), ms(p.p50-d.p50), d.cpuPerReq(), p.cpuPerReq(), p.upCPUPerReq(), ratio(p.cpuPerReq(), p.upCPUPerReq())))
		}
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString("\n| upstream rows | conc | direct p50 ms | via portcullis p50 ms | added p50 ms | upstream CPU µs/call, direct | portcullis CPU µs/proxied call | upstream CPU µs/call, proxied | portcullis ÷ upstream CPU |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, l := range lines {
		b.WriteString(l)
	}
	d, ok1 := rep.find(upstreamName, pathModern, 1)
	p, ok2 := rep.find(proxiedName, pathModern, 1)
	if ok1 && ok2 {
		added := p.p50 - d.p50
		fmt.Fprintf(b, "\n- added p50 at c=1 (2026-07-28) ≤ %.2f ms: %.3f ms, %s\n", ms(targetAddedP50), ms(added), yes(added <= targetAddedP50))
	}
	d, ok1 = rep.find(upstreamName, pathModern, 16)
	p, ok2 = rep.find(proxiedName, pathModern, 16)
	if ok1 && ok2 {
		fmt.Fprintf(b, "- portcullis CPU per proxied call ≤ %d µs (2026-07-28, c=16): %.0f µs, %s\n",
			targetProxiedCPU, p.cpuPerReq(), yes(p.cpuPerReq() <= targetProxiedCPU))
		kept := ratio(p.rps(), d.rps())
		fmt.Fprintf(b, "- the upstream keeps ≥ %.0f %% of its direct throughput through portcullis on the shared core (2026-07-28, c=16): %.0f %% (%.0f of %.0f req/s), %s\n",
			100*targetKeptThrough, 100*kept, p.rps(), d.rps(), yes(kept >= targetKeptThrough))
	}
}

// replicasTable writes the rows of portable sessions next to Portcullis
// alone and to replicas with affinity: the share of its throughput each
// keeps, and the CPU per call of Portcullis (the replicas' summed), Redis
// and HAProxy. On the 2026-07-28 path, which keeps no session, the rows
// show what the Redis rate buckets, the balancer and three processes cost.
func (rep *report) replicasTable(b *strings.Builder) {
	var lines []string
	portable := false // a row of portable sessions was measured
	for _, path := range rep.cfg.paths {
		for _, conc := range rep.cfg.conc {
			one, ok := rep.find("portcullis", path, conc)
			if !ok || one.rps() == 0 {
				continue
			}
			for _, name := range []string{"portcullis", redisMemoryRowName, redisRowName, affinityRowName, replicasRowName} {
				r, ok := rep.find(name, path, conc)
				if !ok || r.requests == 0 {
					continue
				}
				portable = portable || name != "portcullis"
				lines = append(lines, fmt.Sprintf("| %s | %d | %s | %.0f | %.2f | %.2f | %.2f | %.0f | %.0f | %.0f | %.0f |\n",
					path, conc, label(name), r.rps(), r.rps()/one.rps(), ms(r.p50), ms(r.p99),
					r.cpuPerReq(), r.storeCPUPerReq(), r.lbCPUPerReq(), r.cpuPerReq()+r.storeCPUPerReq()+r.lbCPUPerReq()))
			}
		}
	}
	if !portable {
		return
	}
	b.WriteString("\n| portable sessions | conc | server | req/s | ÷ portcullis | p50 ms | p99 ms | Portcullis CPU µs/call | Redis CPU µs/call | HAProxy CPU µs/call | server side CPU µs/call |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, l := range lines {
		b.WriteString(l)
	}
	b.WriteString("\n")
	if rep.rebuiltKnown {
		fmt.Fprintf(b, "- sessions the replicas rebuilt from their records over the run: %.0f\n", rep.rebuilt)
	}
	// The goal: each deployment sharing its sessions against the same
	// one keeping them in memory.
	for _, g := range []struct{ shared, memory, what string }{
		{redisRowName, redisMemoryRowName, "one replica"},
		{replicasRowName, affinityRowName, fmt.Sprintf("%d replicas behind HAProxy (round robin; in memory, with affinity)", replicaCount)},
	} {
		sh, ok1 := rep.find(g.shared, pathLegacy, 16)
		mem, ok2 := rep.find(g.memory, pathLegacy, 16)
		if !ok1 || !ok2 || mem.rps() == 0 {
			continue
		}
		kept := sh.rps() / mem.rps()
		fmt.Fprintf(b, "- sessions in Redis keep ≥ %.0f %% of the throughput with sessions in memory (2025-11-25, c=16), %s: %.1f %% (%.0f of %.0f req/s), %s\n",
			100*targetReplicasKept, g.what, 100*kept, sh.rps(), mem.rps(), yes(kept >= targetReplicasKept))
	}
	one, ok1 := rep.find("portcullis", pathLegacy, 16)
	rs, ok2 := rep.find(replicasRowName, pathLegacy, 16)
	if ok1 && ok2 && one.rps() > 0 {
		fmt.Fprintf(b, "- %d replicas behind HAProxy sharing their sessions against one replica without Redis (2025-11-25, c=16; pinned, they, HAProxy and Redis share its core): %.1f %% (%.0f of %.0f req/s)\n",
			replicaCount, 100*rs.rps()/one.rps(), rs.rps(), one.rps())
	}
}

// ratio is a/b, or 0 when b is 0 (no CPU tick was seen).
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// check fails a run whose telemetry did not work (a Portcullis that
// serves metrics also exports traces, and the sink must have seen them),
// and one whose replicas behind the balancer served their sessions'
// requests without rebuilding any: the balancer kept each session on one
// replica, and the row did not measure portable sessions.
func (rep *report) check() error {
	if rep.rebuiltKnown && rep.rebuilt == 0 {
		return fmt.Errorf("the %d replicas behind HAProxy rebuilt no session (%s): the 2025-11-25 requests did not move between replicas", replicaCount, sessionsRebuilt)
	}
	if rep.badSpanPosts > 0 {
		return fmt.Errorf("OTLP sink refused %d requests that were not protobuf POSTs", rep.badSpanPosts)
	}
	if !rep.noMetrics && rep.spanPosts == 0 {
		return errors.New("the OTLP sink received no traces from Portcullis")
	}
	return nil
}
