//go:build !unix

package datadir

import (
	"errors"
	"os"
)

// tryLock cannot lock here: data dirs are prepared on unix systems, where
// etcd's own lock is a flock.
func tryLock(*os.File) error { return nil }

// heldByOther cannot tell here, for the same reason.
func heldByOther(*os.File) (bool, error) { return false, nil }

// FreeSpace is unknown here: errors.ErrUnsupported, and the caller skips
// its check.
func FreeSpace(string) (int64, error) { return 0, errors.ErrUnsupported }
