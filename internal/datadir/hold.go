package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrInUse is a data dir whose database another process holds open.
var ErrInUse = errors.New("the data dir is in use")

// Hold takes, without waiting, the lock etcd takes on dir's database
// (bbolt's flock on member/snap/db) and keeps it until release. An etcd
// that runs on dir holds that lock, so Hold fails with ErrInUse; while
// Hold has it, an etcd started on dir waits instead of writing into a
// data dir that is about to be replaced. A dir without a database holds
// nothing.
func Hold(dir string) (release func(), err error) {
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
