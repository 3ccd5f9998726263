package wrapper

import (
	"os"
	"syscall"
)

// childAttr puts etcd in a process group of its own, so that a terminal's
// Ctrl-C reaches the wrapper alone, which stops etcd in order, and has the
// kernel kill etcd when the wrapper dies without stopping it: a second
// wrapper must not find the data dir held by an orphan.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// terminate asks etcd to stop gracefully.
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
