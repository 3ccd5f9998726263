//go:build unix

package datadir

import (
	"errors"
	"os"
	"syscall"
)

// flockHeld says whether another open file description holds a flock on
// f: what bbolt takes on a database, and etcd on its WAL files outside
// Linux.
func flockHeld(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
