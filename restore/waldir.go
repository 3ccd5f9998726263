package restore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/etcdkit/etcdkit/internal/datadir"
)

// swapIn puts the built data dir in place, moving an existing one aside.
// With a wal-dir, the WAL built inside it (member/wal) first takes the
// wal-dir's place, the old WAL moved aside as well, and it goes back when
// the data dir's swap fails: the old data dir and WAL stay a pair.
func swapIn(built, dataDir, walDir string, now time.Time) (movedAside, walAside string, err error) {
	var undo func()
	if walDir != "" {
		if walAside, undo, err = swapInWAL(filepath.Join(built, "member", "wal"), walDir, now); err != nil {
			return "", "", fmt.Errorf("restore: move the restored WAL into %s: %w", walDir, err)
		}
	}
	if movedAside, err = datadir.Replace(built, dataDir, now); err != nil {
		if undo != nil {
			undo()
		}
		return "", "", fmt.Errorf("restore: move the restored data dir into place: %w", err)
	}
	return movedAside, walAside, nil
}

// swapInWAL moves the WAL at built into walDir's place: through a
// directory beside walDir, so the last step is a rename on walDir's own
// file system (a wal-dir is often a volume of its own). undo puts the old
// WAL back and drops the new one, which is this restore's.
func swapInWAL(built, walDir string, now time.Time) (aside string, undo func(), err error) {
	parent := filepath.Dir(walDir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", nil, err
	}
	tmp, err := os.MkdirTemp(parent, filepath.Base(walDir)+".tmp-")
	if err != nil {
		return "", nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	staged := filepath.Join(tmp, "wal")
	if err := moveDir(built, staged); err != nil {
		return "", nil, err
	}
	if aside, err = datadir.Replace(staged, walDir, now); err != nil {
		return "", nil, err
	}
	return aside, func() {
		dropped := walDir + ".failed-" + now.UTC().Format("20060102T150405Z")
		if err := os.Rename(walDir, dropped); err == nil {
			_ = os.RemoveAll(dropped)
		}
		if aside != "" {
			_ = os.Rename(aside, walDir)
		}
	}, nil
}

// moveDir renames dir to to, or copies its files there (synced) when
// they are on two file systems.
func moveDir(dir, to string) error {
	err := os.Rename(dir, to)
	if !errors.Is(err, syscall.EXDEV) {
		return err
	}
	if err := os.Mkdir(to, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := datadir.CopyFile(filepath.Join(dir, e.Name()), filepath.Join(to, e.Name())); err != nil {
			return err
		}
	}
	datadir.SyncParent(filepath.Join(to, "x"))
	return os.RemoveAll(dir)
}

// prune removes the oldest moved-aside data dirs (and WAL dirs) that
// etcdkit built past keep, logging what it did.
func prune(o Options, what string, movedAside, walAside string) {
	for _, p := range []struct {
		dir, just string
		built     func(string) bool
	}{{o.Member.DataDir, movedAside, nil}, {o.Member.WALDir, walAside, datadir.Companion(o.Member.WALDir, o.Member.DataDir)}} {
		if p.dir == "" {
			continue
		}
		if pruned, err := datadir.Prune(p.dir, o.KeepMovedAside, p.just, p.built); err != nil {
			o.Read.Logger.Warn(what+": prune moved-aside dirs", "error", err)
		} else if len(pruned) > 0 {
			o.Read.Logger.Info(what+": pruned moved-aside dirs", "removed", pruned, "keep", o.KeepMovedAside)
		}
	}
}
