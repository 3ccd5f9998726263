//go:build !unix

package emulator

import (
	"os"
	"syscall"
)

// procAttr: no process groups here; the emulator is killed alone.
func procAttr() *syscall.SysProcAttr { return nil }

// killGroup kills the process pid.
func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
