//go:build !linux

package datadir

import "errors"

// ReleaseMapped is a no-op where the process's mappings are not listed.
func ReleaseMapped(string) error { return nil }

// ResidentFile is not known where /proc/self/status is not.
func ResidentFile() (int64, error) { return 0, errors.ErrUnsupported }
