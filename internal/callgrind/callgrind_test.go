package callgrind

import "testing"

// TestOutsideValgrind: outside valgrind every request is harmless and
// Running says so (make budget runs the requests under valgrind).
func TestOutsideValgrind(t *testing.T) {
	if Running() {
		t.Skip("running under valgrind")
	}
	StartInstrumentation()
	ZeroStats()
	DumpStatsAt("test")
	StopInstrumentation()
}
