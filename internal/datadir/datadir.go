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
	aside := asideName(dir, now)
	if err := os.Rename(dir, aside); err != nil {
		return "", fmt.Errorf("move data dir %s aside: %w", dir, err)
	}
	SyncParent(dir)
	return aside, nil
}

// asideName is dir.bak-<now>, or with -2, -3… when an earlier move in the
// same second took it: two restores a second apart must not collide.
func asideName(dir string, now time.Time) string {
	base := fmt.Sprintf("%s.bak-%s", dir, now.UTC().Format("20060102T150405Z"))
	name := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(name); errors.Is(err, os.ErrNotExist) {
			return name
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
}

// SyncParent makes a rename in dir's parent durable; a failure only costs
// durability across a power loss, so it is not reported.
func SyncParent(dir string) {
	if d, err := os.Open(filepath.Dir(dir)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// Replace puts built in dir's place and moves the old dir, if any, aside;
// it returns where the old one went. Where the kernel can exchange two
// names in one step (Linux), dir is at every instant either the old data
// dir or the new one, so a process killed halfway leaves a data dir etcd
// can start on; elsewhere two renames leave a moment without one.
func Replace(built, dir string, now time.Time) (string, error) {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.Rename(built, dir); err != nil {
			return "", err
		}
		SyncParent(dir)
		return "", nil
	}
	aside := asideName(dir, now)
	if exchanged, err := exchange(built, dir); err != nil {
		return "", err
	} else if exchanged {
		// built now holds the old data dir.
		if err := os.Rename(built, aside); err != nil {
			return "", fmt.Errorf("move the old data dir %s aside: %w", built, err)
		}
		SyncParent(dir)
		return aside, nil
	}
	if _, err := MoveAside(dir, now); err != nil {
		return "", err
	}
	if err := os.Rename(built, dir); err != nil {
		_ = os.Rename(aside, dir)
		return "", err
	}
	SyncParent(dir)
	return aside, nil
}
