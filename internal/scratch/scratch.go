package scratch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// grace covers the moment between creating a scratch file or directory
// and locking it, when an orphan and a newborn look alike.
const grace = 5 * time.Second

// lockName is the file inside a scratch directory its owner locks.
const lockName = ".etcdkit-scratch-lock"

// File creates a temporary file in dir named by pattern (as
// os.CreateTemp) and locks it until it is closed, after removing the
// orphans of the same pattern.
func File(dir, pattern string) (*os.File, error) {
	Sweep(dir, prefixOf(pattern))
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	if err := tryLock(f); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// Dir creates a temporary directory in parent named prefix+random, locked
// until release, which also removes it; orphans of the same prefix are
// removed first.
func Dir(parent, prefix string) (string, func(), error) {
	Sweep(parent, prefix)
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return "", nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		if err = tryLock(lock); errors.Is(err, errors.ErrUnsupported) {
			err = nil
		}
	}
	if err != nil {
		if lock != nil {
			_ = lock.Close()
		}
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	return dir, func() {
		_ = os.RemoveAll(dir)
		_ = lock.Close()
	}, nil
}

// Sweep removes the entries of parent whose names start with prefix and
// that no living process holds.
func Sweep(parent, prefix string) { sweep(parent, prefix, false) }

// SweepMade is Sweep for a prefix that other programs' entries may share
// (a work dir such as /tmp): of the directories it removes only those
// that carry scratch's lock file, so a directory scratch did not make
// stays, whatever its name.
func SweepMade(parent, prefix string) { sweep(parent, prefix, true) }

func sweep(parent, prefix string, made bool) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		path := filepath.Join(parent, e.Name())
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < grace {
			continue
		}
		lockPath := path
		if e.IsDir() {
			lockPath = filepath.Join(path, lockName)
		}
		if orphan(lockPath, e.IsDir() && !made) {
			_ = os.RemoveAll(path)
		}
	}
}

// orphan says whether nobody holds the lock at path; a missing lock file
// counts as an orphan's when lockless says so (a directory that lost its
// owner before the lock file was made).
func orphan(path string, lockless bool) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return lockless
	}
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	if err := tryLock(f); err != nil {
		return false
	}
	return true
}

// prefixOf is the part of an os.CreateTemp pattern before its "*".
func prefixOf(pattern string) string {
	if i := strings.LastIndex(pattern, "*"); i >= 0 {
		return pattern[:i]
	}
	return pattern
}
