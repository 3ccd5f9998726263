package freeport

import (
	"os"

	"golang.org/x/sys/unix"
)

// tryLock flocks f without waiting; the kernel drops the lock when the
// process ends, however it ends.
func tryLock(f *os.File) error {
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
}
