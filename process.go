package portcullis

import (
	"io"
	"strings"
)

// process is what a command runs with: its command line (the program
// name excluded), the environment (KEY=VALUE entries) and the standard
// streams. Commands read the environment through it alone.
type process struct {
	args           []string
	environ        []string
	stdin          io.Reader
	stdout, stderr io.Writer
}

// getenv returns the value of key in the process environment, "" if unset
// (the last entry wins, as in the os package).
func (p process) getenv(key string) string {
	v := ""
	for _, kv := range p.environ {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// usageError is a command line that is wrong: an unknown flag, a missing
// argument. The binary exits 2 for it.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
