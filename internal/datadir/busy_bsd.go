//go:build unix && !linux

package datadir

import "os"

// heldByOther says whether another process holds a lock on f: etcd and
// bbolt take flocks here.
func heldByOther(f *os.File) (bool, error) { return flockHeld(f) }
