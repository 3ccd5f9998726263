package files

import (
	"fmt"
	"os"
	"path/filepath"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.uber.org/zap"
)

// CheckSnaps loads every snap file (each carries a CRC) and checks that
// the WAL's newest snapshot record has its file, without which etcd cannot
// start. It returns the file at fault.
func CheckSnaps(dir string, newest *walpb.Snapshot) (file string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("snap %s: %v", file, p)
		}
	}()
	names, err := filepath.Glob(filepath.Join(dir, "*.snap"))
	if err != nil {
		return dir, err
	}
	for _, name := range names {
		file = name
		if _, err := snap.Read(zap.NewNop(), name); err != nil {
			return name, fmt.Errorf("snap %s: %w", name, err)
		}
	}
	if newest != nil {
		want := filepath.Join(dir, fmt.Sprintf("%016x-%016x.snap", newest.GetTerm(), newest.GetIndex()))
		if _, err := os.Stat(want); err != nil {
			return want, fmt.Errorf("snap %s: the WAL's newest snapshot record (index %d) has no snap file: %w", want, newest.GetIndex(), err)
		}
	}
	return "", nil
}
