package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The targets a load run is measured against.
const (
	targetThroughputRatio = 1.0
	targetP99             = 5 * time.Millisecond
	targetIdleRSSKiB      = 20 << 10
	targetSessionKiB      = 20
	targetStartup         = 100 * time.Millisecond
)

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

// perSessionKiB is the RSS growth per idle session.
func (rep *report) perSessionKiB() float64 {
	if rep.sessions == 0 {
		return 0
	}
	return float64(rep.sessRSS-rep.sessBaseRSS) / float64(rep.sessions)
}

// liveKiBPerSession is the live-heap growth per idle session.
func (rep *report) liveKiBPerSession() float64 {
	if rep.sessions == 0 {
		return 0
	}
	return rep.sessLiveBytes / 1024 / float64(rep.sessions)
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
	fmt.Fprintf(&b, "### Load test: bare SDK (ref) vs Portcullis full stack (%s)\n\n", map[bool]string{true: "pinned", false: "unpinned"}[c.pin])
	fmt.Fprintf(&b, "- %s, %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), rep.machine)
	fmt.Fprintf(&b, "- %s; %s\n", pin, mode)
	fmt.Fprintf(&b, "- ref: bare go-sdk v1.8.0 stateless StreamableHTTPHandler, echo tool only (it keeps no sessions, so on the 2025-11-25 path it answers the same requests statelessly)")
	if len(c.refEnv) > 0 {
		fmt.Fprintf(&b, "; env %s", strings.Join(c.refEnv, " "))
	}
	b.WriteString("\n")
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
		name := r.server
		if name == "refserver" {
			name = "ref"
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %.0f | %.2f | %.2f | %.0f | %s | %s | %s | %s | %s |\n",
			r.path, r.conc, name, r.rps(), ms(r.p50), ms(r.p99), r.cpuPerReq(), kib, allocs, mib(r.rssKiB), ratio, cpuRatio)
	}
	b.WriteString("\n| memory and startup | ref | portcullis |\n|---|---:|---:|\n")
	fmt.Fprintf(&b, "| RSS idle, MiB | %s | %s |\n", mib(rep.idleRSS["refserver"]), mib(rep.idleRSS["portcullis"]))
	fmt.Fprintf(&b, "| RSS after the load above, MiB | %s | %s |\n", mib(rep.loadRSS["refserver"]), mib(rep.loadRSS["portcullis"]))
	if rep.sessions > 0 {
		fmt.Fprintf(&b, "| fresh process: RSS idle → before → with %d idle 2025-11-25 sessions, MiB | – | %s → %s → %s (%.1f KiB per session) |\n",
			rep.sessions, mib(rep.sessIdleRSS), mib(rep.sessBaseRSS), mib(rep.sessRSS), rep.perSessionKiB())
		fmt.Fprintf(&b, "| live heap (after a GC) + goroutine stacks per idle session, KiB | – | %.1f |\n", rep.liveKiBPerSession())
	}
	if len(rep.startups) > 0 {
		fmt.Fprintf(&b, "| start to ready (`serve --dev`, /readyz 200), median of %d | – | %.1f ms (max %.1f ms) |\n",
			len(rep.startups), ms(rep.medianStartup()), ms(slices.Max(rep.startups)))
	}
	b.WriteString("\n| target (issue 6) | measured | |\n|---|---|---|\n")
	if pc, ok := rep.find("portcullis", pathModern, 16); ok {
		if ref, ok := rep.find("refserver", pathModern, 16); ok {
			ratio := pc.rps() / ref.rps()
			fmt.Fprintf(&b, "| 2026-07-28 throughput at c=16 ≥ %.1f× ref | %.2f× | %s |\n", targetThroughputRatio, ratio, yes(ratio >= targetThroughputRatio))
		}
		note := ""
		if !c.pin {
			note = " (the target is for the pinned run)"
		}
		fmt.Fprintf(&b, "| p99 at c=16 ≤ %s%s | %.2f ms | %s |\n", targetP99, note, ms(pc.p99), yes(pc.p99 <= targetP99))
	}
	idle := rep.idleRSS["portcullis"]
	fmt.Fprintf(&b, "| idle RSS ≤ %d MiB | %s MiB | %s |\n", targetIdleRSSKiB>>10, mib(idle), yes(idle <= targetIdleRSSKiB))
	if rep.sessions > 0 {
		fmt.Fprintf(&b, "| ≤ %d KiB per idle legacy session (RSS) | %.1f KiB | %s |\n", targetSessionKiB, rep.perSessionKiB(), yes(rep.perSessionKiB() <= targetSessionKiB))
		fmt.Fprintf(&b, "| ≤ %d KiB per idle legacy session (live heap + stacks) | %.1f KiB | %s |\n", targetSessionKiB, rep.liveKiBPerSession(), yes(rep.liveKiBPerSession() <= targetSessionKiB))
	}
	if len(rep.startups) > 0 {
		fmt.Fprintf(&b, "| start to ready ≤ %s | %.1f ms | %s |\n", targetStartup, ms(rep.medianStartup()), yes(rep.medianStartup() <= targetStartup))
	}
	return b.String()
}

// check fails a run whose telemetry did not work: a Portcullis that serves
// metrics also exports traces, and the sink must have seen them.
func (rep *report) check() error {
	if rep.badSpanPosts > 0 {
		return fmt.Errorf("OTLP sink refused %d requests that were not protobuf POSTs", rep.badSpanPosts)
	}
	if !rep.noMetrics && rep.spanPosts == 0 {
		return errors.New("Portcullis exported no traces to the OTLP sink")
	}
	return nil
}
