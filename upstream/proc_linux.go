package upstream

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the stdio server in a process group of its own, so that
// children it leaves behind can be killed with it, and has the kernel kill
// it if Portcullis dies without stopping it.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills what is left of the stdio server's process group, once
// the server itself has exited or been stopped.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
