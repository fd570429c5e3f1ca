//go:build e2e

package e2e

import "time"

// poll calls cond every interval until it returns true or timeout passes,
// and reports whether it did. It is how these tests wait for a separate
// process (the binary, the IdP, Prometheus, the Collector) to reach a state
// it has no way to announce: a scrape shows a series, a log line arrives
// through a pipe, a port answers.
func poll(timeout, interval time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case <-tick.C:
			if cond() {
				return true
			}
		case <-deadline.C:
			return cond()
		}
	}
}
