//go:build !linux

package upstream

import "os/exec"

// setProcAttr leaves the process attributes as they are outside Linux.
func setProcAttr(*exec.Cmd) {}

// killGroup kills the stdio server if it is still running.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
