//go:build unix && !linux

package emulator

import "syscall"

// procAttr puts the emulator in a process group of its own, so that
// Node's children are killed with it. Only Linux kills it with its parent.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills the process group pid leads.
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
