//go:build unix

package datadir

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes f's exclusive flock without waiting; errBusy when another
// open file description holds it.
func tryLock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errBusy
	}
	return err
}

// FreeSpace is how many bytes an unprivileged process may still write on
// the file system that holds dir.
func FreeSpace(dir string) (int64, error) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return 0, err
	}
	// The fields' types differ between systems.
	return int64(fs.Bavail) * int64(fs.Bsize), nil //nolint:unconvert,gosec // uint32 on darwin
}
