package datadir

import (
	"os"

	"golang.org/x/sys/unix"
)

// heldByOther says whether another process holds a lock on f: the flock
// bbolt takes on a database, or the open file description lock etcd takes
// on its WAL files on Linux (the two kinds do not see each other).
func heldByOther(f *os.File) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err == nil && lk.Type != unix.F_UNLCK {
		return true, nil
	}
	return flockHeld(f)
}
