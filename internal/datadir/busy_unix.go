//go:build unix && !linux

package datadir

import (
	"errors"
	"os"
	"syscall"
)

// heldByOther says whether another process holds a flock on f: what bbolt
// takes on a database and etcd on its WAL files outside Linux.
func heldByOther(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
