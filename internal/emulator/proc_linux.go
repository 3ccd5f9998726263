package emulator

import "syscall"

// procAttr puts the emulator in a process group of its own, so that
// Node's children are killed with it, and kills it with the test process,
// even when that one is killed.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// killGroup kills the process group pid leads.
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
