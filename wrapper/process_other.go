//go:build !linux

package wrapper

import (
	"os"
	"syscall"
)

// childAttr puts etcd in a process group of its own, so that a terminal's
// Ctrl-C reaches the wrapper alone, which stops etcd in order. (Only Linux
// also kills the child with the wrapper.)
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// terminate asks etcd to stop gracefully.
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
