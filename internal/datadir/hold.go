package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrInUse is a data dir whose database another process holds open.
var ErrInUse = errors.New("the data dir is in use")

// Hold takes, without waiting, the lock etcd takes on dir's database
// (bbolt's flock on member/snap/db) and keeps it until release. An etcd
// that runs on dir holds that lock, so Hold fails with ErrInUse; while
// Hold has it, an etcd started on dir waits instead of writing into a
// data dir that is about to be replaced. A dir without a database holds
// nothing.
//
// It fails with ErrInUse too when dir, or walDir (a dedicated WAL dir; ""
// for none), is another part of a running member: a directory inside its
// data dir (its member/ directory), one that holds its data dir (a
// parent), or one that holds a database or WAL file a running etcd has
// locked. Each of these would be moved aside from under it.
func Hold(dir, walDir string) (release func(), err error) {
	if err := notInUse(dir, walDir); err != nil {
		return nil, err
	}
	db := filepath.Join(dir, "member", "snap", "db")
	f, err := os.Open(db)
	if errors.Is(err, os.ErrNotExist) {
		return func() {}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	if err := tryLock(f); err != nil {
		_ = f.Close()
		if errors.Is(err, errBusy) {
			return nil, fmt.Errorf("data dir %s: %w: another process (a running etcd) holds %s; stop etcd first, then restore", dir, ErrInUse, db)
		}
		return nil, fmt.Errorf("data dir %s: lock %s: %w", dir, db, err)
	}
	return func() { _ = f.Close() }, nil
}

// notInUse fails with ErrInUse when dir lies inside a data dir a running
// etcd holds, or dir or walDir holds a database or WAL file a running etcd
// has locked.
func notInUse(dir, walDir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	// Where a symbolic link leads is what would be moved aside.
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	for up := filepath.Dir(abs); ; up = filepath.Dir(up) {
		db := filepath.Join(up, "member", "snap", "db")
		if held, err := busy(db); err != nil {
			return fmt.Errorf("data dir %s: %w", dir, err)
		} else if held {
			return fmt.Errorf("data dir %s: %w: it lies inside the data dir %s, which a running etcd holds (%s); give the data dir itself, and stop etcd first",
				dir, ErrInUse, up, db)
		}
		if up == filepath.Dir(up) {
			break
		}
	}
	for _, d := range []string{dir, walDir} {
		if d == "" {
			continue
		}
		if err := noneLocked(d, filepath.Join(dir, "member", "snap", "db")); err != nil {
			return err
		}
	}
	return nil
}

// noneLocked walks dir for etcd's databases and WAL files and fails with
// ErrInUse on one another process holds locked; own is the data dir's own
// database, named as such. A missing dir holds none.
func noneLocked(dir, own string) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		if d.Name() != "db" && !strings.HasSuffix(d.Name(), ".wal") {
			return nil
		}
		held, err := busy(p)
		if err != nil {
			return err
		}
		switch {
		case held && p == own:
			return fmt.Errorf("data dir %s: %w: another process (a running etcd) holds %s; stop etcd first, then restore", dir, ErrInUse, p)
		case held:
			return fmt.Errorf("%s: %w: a running etcd holds %s in it; stop etcd first, then restore", dir, ErrInUse, p)
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrInUse) {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return err
}

// busy says whether another process holds a lock on the file at path; a
// missing file is not busy.
func busy(path string) (bool, error) {
	// Opening a FIFO would wait for a writer.
	info, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) || err == nil && !info.Mode().IsRegular() {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer func() { _ = f.Close() }()
	return heldByOther(f)
}
