package mcp

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// goid returns the calling goroutine's id, from its stack header.
func goid() int {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := bytes.Fields(buf)
	id, _ := strconv.Atoi(string(f[1]))
	return id
}

func TestToolWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newToolWorkers(time.Second)
		ran := make(chan int, 3)

		p.run(func() { ran <- goid() })
		first := <-ran
		synctest.Wait() // the worker waits for its next call
		p.run(func() { ran <- goid() })
		if second := <-ran; second != first {
			t.Errorf("a call after the first ran on goroutine %d, want the waiting worker %d", second, first)
		}

		// A busy worker takes no call: the next one gets a new worker.
		synctest.Wait()
		release := make(chan struct{})
		p.run(func() { ran <- goid(); <-release })
		busy := <-ran
		p.run(func() { ran <- goid() })
		if other := <-ran; other == busy {
			t.Errorf("a call ran on goroutine %d, which was busy with another call", other)
		}
		close(release)

		// Idle workers end after the idle time; synctest.Test fails if a
		// goroutine of the bubble is still blocked when it returns.
		time.Sleep(2 * time.Second)
		synctest.Wait()
	})
}

// deepStack uses about depth KiB of stack, as a tool call's decoding and
// schema validation do.
//
//go:noinline
func deepStack(depth int) byte {
	var buf [1024]byte
	buf[depth%len(buf)] = byte(depth)
	if depth == 0 {
		return buf[0]
	}
	return deepStack(depth-1) + buf[depth%len(buf)]
}

// BenchmarkToolWorkers compares a call on a new goroutine, whose stack
// grows from the minimum on every call, with a call on a toolWorkers
// worker, which keeps its grown stack.
func BenchmarkToolWorkers(b *testing.B) {
	const depth = 24 // KiB of stack per call
	b.Run("new goroutine", func(b *testing.B) {
		done := make(chan struct{})
		for b.Loop() {
			go func() { deepStack(depth); done <- struct{}{} }()
			<-done
		}
	})
	b.Run("worker", func(b *testing.B) {
		p := newToolWorkers(time.Minute)
		done := make(chan struct{})
		for b.Loop() {
			p.run(func() { deepStack(depth); done <- struct{}{} })
			<-done
		}
	})
}

// inBubble runs f in a synctest bubble that, before it ends, lets the tool
// workers of the servers f built run out their idle time: a tool call
// bounded by the tool timeout runs on a worker that waits toolWorkerIdle
// for its next call, and a bubble may not end with it waiting.
func inBubble(t *testing.T, f func(t *testing.T)) {
	synctest.Test(t, func(t *testing.T) {
		t.Cleanup(func() { time.Sleep(toolWorkerIdle) })
		f(t)
	})
}
