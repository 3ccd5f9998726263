package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// etcd locks its WAL files with open file description locks on Linux,
// which a flock does not see: a WAL dir a running etcd writes is refused
// as a restore's --wal-dir.
func TestHoldRefusesAWALInUse(t *testing.T) {
	root := t.TempDir()
	wal := filepath.Join(root, "wal")
	if err := os.MkdirAll(wal, 0o700); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(wal, "0000000000000000-0000000000000000.wal")
	if err := os.WriteFile(seg, make([]byte, 64), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		t.Fatal(err)
	}
	if _, err := Hold(filepath.Join(root, "data"), wal); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), seg) {
		t.Fatalf("a WAL dir in use: %v", err)
	}
	_ = f.Close()
	release, err := Hold(filepath.Join(root, "data"), wal)
	if err != nil {
		t.Fatalf("once released: %v", err)
	}
	release()
}
