package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// errBusy is a lock another process holds.
var errBusy = errors.New("held by another process")

// LockBuild keeps two restores from building the same data dir at once,
// and, once held, removes what restores killed before were building
// (dataDir.tmp-*): under the lock nobody else is building them. The lock
// is a file beside the data dir, dataDir.restore-lock, while it is held.
func LockBuild(dataDir string) (unlock func(), err error) {
	f, err := os.OpenFile(dataDir+".restore-lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	if err := tryLock(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("data dir %s: another restore of it is running (%w)", dataDir, err)
	}
	stale, _ := filepath.Glob(dataDir + ".tmp-*")
	for _, dir := range stale {
		_ = os.RemoveAll(dir)
	}
	// Removed while held, so a data dir keeps no company once restored.
	return func() {
		_ = os.Remove(f.Name())
		_ = f.Close()
	}, nil
}
