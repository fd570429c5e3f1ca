package mcp

import "sync"

// goroutines runs the goroutines of a part of the handler that Close must
// wait for: once closed, it starts no more, and close returns when those it
// started have ended.
type goroutines struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// goOn runs f on a goroutine of its own, unless g is closed; it reports
// whether it did.
func (g *goroutines) goOn(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Go(f)
	return true
}

// close starts no more goroutines and waits for those running to end.
func (g *goroutines) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
