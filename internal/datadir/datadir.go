package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// MoveAside renames dir to dir.bak-<now>, and returns the new name, or ""
// when dir does not exist.
func MoveAside(dir string, now time.Time) (string, error) {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	aside := fmt.Sprintf("%s.bak-%s", dir, now.UTC().Format("20060102T150405Z"))
	if err := os.Rename(dir, aside); err != nil {
		return "", fmt.Errorf("move data dir %s aside: %w", dir, err)
	}
	SyncParent(dir)
	return aside, nil
}

// SyncParent makes a rename in dir's parent durable; a failure only costs
// durability across a power loss, so it is not reported.
func SyncParent(dir string) {
	if d, err := os.Open(filepath.Dir(dir)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
