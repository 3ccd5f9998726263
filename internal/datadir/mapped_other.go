//go:build !linux

package datadir

// ReleaseMapped is a no-op where the process's mappings are not listed.
func ReleaseMapped(string) error { return nil }
