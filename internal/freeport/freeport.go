package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
)

// minPort is the lowest port picked: below it lie well-known services'.
const minPort = 10000

// slots divide the range between the processes that pick at once: the
// test tiers' four test processes, the programs some of them run that
// pick ports of their own (the examples, the soak's harness), and room for
// a bench or a second run beside them. A process that finds every slot
// held picks from the whole range, where another's ports may collide with
// its own.
const slots = 16

// picker is the process's state: the ports handed out and its range.
var picker struct {
	sync.Mutex
	once   sync.Once
	ports  map[int]bool
	lo, hi int
	// lock holds the slot for the process's life.
	lock *os.File
}

// Pick returns a loopback TCP port that was free a moment ago, that it
// has not returned before in this process, and that no other process
// using this package picks while this one runs.
func Pick() (int, error) {
	picker.once.Do(claim)
	picker.Lock()
	defer picker.Unlock()
	if picker.ports == nil {
		picker.ports = map[int]bool{}
	}
	if picker.hi > picker.lo {
		for range 200 {
			port := picker.lo + rand.IntN(picker.hi-picker.lo)
			if picker.ports[port] {
				continue
			}
			if !free(port) {
				continue
			}
			picker.ports[port] = true
			return port, nil
		}
	}
	// No range below the ephemeral one (not Linux): the kernel's pick.
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("pick a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			return 0, err
		}
		if !picker.ports[port] {
			picker.ports[port] = true
			return port, nil
		}
	}
	return 0, errors.New("pick a free port: every port tried was taken or handed out already")
}

func free(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	return l.Close() == nil
}

// claim sets the process's range: a slot of the ports between minPort
// and the ephemeral range, or all of them when no slot can be locked.
func claim() {
	low := ephemeralLow()
	if low <= minPort+slots*100 {
		return
	}
	picker.lo, picker.hi = minPort, low
	span := (low - minPort) / slots
	for k := range slots {
		// Not "etcdkit-": a sidecar's work dir may be this directory, and
		// it sweeps what its own runs left under that prefix.
		f, err := os.OpenFile(filepath.Join(os.TempDir(), fmt.Sprintf("etcdkit.freeport.%d.lock", k)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return
		}
		if err := tryLock(f); err != nil {
			_ = f.Close()
			if errors.Is(err, errors.ErrUnsupported) {
				return
			}
			continue
		}
		picker.lock = f
		picker.lo, picker.hi = minPort+k*span, minPort+(k+1)*span
		return
	}
}

// ephemeralLow is the first port of the kernel's ephemeral range, 0 when
// it cannot be read (not Linux).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	var low, high int
	if _, err := fmt.Sscan(string(b), &low, &high); err != nil {
		return 0
	}
	return low
}
