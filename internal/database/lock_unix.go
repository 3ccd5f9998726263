//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package database

import (
	"errors"
	"os"
	"syscall"
)

func lockShared(f *os.File) (func(), error) {
	fd := int(f.Fd())
	if err := syscall.Flock(fd, syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errors.New("another process holds it open for writing (a running etcd?): stop it first")
		}
		return nil, err
	}
	return func() { _ = syscall.Flock(fd, syscall.LOCK_UN) }, nil
}
