package datadir

import (
	"errors"

	"golang.org/x/sys/unix"
)

// exchange swaps the two names atomically; false when the file system
// cannot, so the caller renames twice.
func exchange(a, b string) (bool, error) {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
		return false, nil
	}
	return err == nil, err
}
