// Package callgrind sends client requests to valgrind's callgrind tool from
// Go: start and stop instrumentation, zero the counters, dump them under a
// label. A test that runs its own binary under
// `valgrind --tool=callgrind --instr-atstart=no` counts the instructions of
// exactly the window it brackets, whatever else the machine is doing.
//
// Outside valgrind every request is a few instructions that do nothing,
// and [Running] reports false. Only amd64 speaks the protocol; on other
// architectures Running is always false.
package callgrind

import "runtime"

// The requests of valgrind.h and callgrind.h (valgrind 3.x).
const (
	runningOnValgrind    = 0x1001
	toolBase             = uintptr('C')<<24 | uintptr('T')<<16
	dumpStatsAt          = toolBase + 3
	zeroStats            = toolBase + 1
	startInstrumentation = toolBase + 4
	stopInstrumentation  = toolBase + 5
)

// send makes one client request with up to five arguments and returns
// valgrind's answer (0 outside valgrind).
func send(req uintptr, args ...uintptr) uintptr {
	var a [6]uintptr
	a[0] = req
	copy(a[1:], args)
	r := request(&a)
	runtime.KeepAlive(&a)
	return r
}

// Running reports whether the process runs under valgrind.
func Running() bool { return send(runningOnValgrind) != 0 }

// StartInstrumentation turns instrumentation on (callgrind's
// --instr-atstart=no leaves it off until then).
func StartInstrumentation() { send(startInstrumentation) }

// StopInstrumentation turns it off again.
func StopInstrumentation() { send(stopInstrumentation) }

// ZeroStats sets every counter to zero.
func ZeroStats() { send(zeroStats) }

// DumpStatsAt writes the counters since the last zero or dump to a new
// file, with label as the dump's trigger ("desc: Trigger: Client Request:
// label"), and zeroes them.
func DumpStatsAt(label string) {
	s := append([]byte(label), 0)
	send(dumpStatsAt, uintptrOf(&s[0]))
	runtime.KeepAlive(s)
}
