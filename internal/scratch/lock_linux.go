package scratch

import (
	"os"

	"golang.org/x/sys/unix"
)

// tryLock takes an open-file-description lock on f without waiting. Not
// flock: bbolt flocks the spooled databases it reads, and the two kinds
// do not see each other; and not a classic POSIX lock, which a process
// holds for all its descriptors, so its own sweep would not see its files
// as taken.
func tryLock(f *os.File) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
}
