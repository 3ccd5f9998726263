package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func mkdir(t *testing.T, dir, marker string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "which"), []byte(marker), 0o600); err != nil {
		t.Fatal(err)
	}
}

func which(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "which"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReplace(t *testing.T) {
	root := t.TempDir()
	dir, now := filepath.Join(root, "data"), time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	mkdir(t, filepath.Join(root, "built1"), "first")
	if aside, err := Replace(filepath.Join(root, "built1"), dir, now); err != nil || aside != "" || which(t, dir) != "first" {
		t.Fatalf("into nothing: %q %v", aside, err)
	}
	mkdir(t, filepath.Join(root, "built2"), "second")
	aside, err := Replace(filepath.Join(root, "built2"), dir, now)
	if err != nil || which(t, dir) != "second" || which(t, aside) != "first" || aside != dir+".bak-20261129T120000Z" {
		t.Fatalf("over a data dir: %q %v", aside, err)
	}
	if _, err := os.Stat(filepath.Join(root, "built2")); !os.IsNotExist(err) {
		t.Fatalf("the built dir is still there: %v", err)
	}
	// A second replacement in the same second does not collide.
	mkdir(t, filepath.Join(root, "built3"), "third")
	aside, err = Replace(filepath.Join(root, "built3"), dir, now)
	if err != nil || which(t, dir) != "third" || which(t, aside) != "second" || aside != dir+".bak-20261129T120000Z-2" {
		t.Fatalf("again in the same second: %q %v", aside, err)
	}
}

func TestPrune(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	// The first moved-aside dir is the cluster's own data, which no
	// restore wrote; the others were built by restores.
	original := dir + ".bak-20261101T000000Z"
	mkdir(t, original, "original")
	names := []string{".bak-20261102T000000Z", ".bak-20261102T000000Z-2", ".bak-20261102T000000Z-10", ".bak-20261103T000000Z", ".bak-20261104T000000Z"}
	for _, n := range names {
		mkdir(t, dir+n, n)
		if err := MarkBuilt(dir+n, "restore", now); err != nil {
			t.Fatal(err)
		}
	}
	mkdir(t, dir+".bak-mine", "an operator's copy")
	left := func() []string {
		m, _ := filepath.Glob(dir + ".bak-*")
		return m
	}
	if removed, err := Prune(dir, -1, "", nil); err != nil || len(removed) != 0 {
		t.Fatalf("keep all: %v %v", removed, err)
	}
	// The one just made is kept even when older by name; then the newest
	// of those etcdkit built. Never the original, nor an operator's copy.
	just := dir + ".bak-20261102T000000Z"
	removed, err := Prune(dir, 2, just, nil)
	if err != nil || len(removed) != 3 {
		t.Fatalf("keep 2: removed %v %v", removed, err)
	}
	want := []string{original, just, dir + ".bak-20261104T000000Z", dir + ".bak-mine"}
	if got := left(); !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
	// 0 is the default: one, the just-made.
	if _, err := Prune(dir, 0, just, nil); err != nil || !slices.Equal(left(), []string{original, just, dir + ".bak-mine"}) {
		t.Fatalf("keep default: %v %v", left(), err)
	}
	// A wal-dir's moved-aside WAL goes with its data dir: kept beside the
	// original, pruned beside a built one or when its data dir is gone.
	wal := filepath.Join(root, "wal")
	for _, n := range []string{".bak-20261101T000000Z", ".bak-20261102T000000Z", ".bak-20261103T000000Z", ".bak-20261105T000000Z"} {
		mkdir(t, wal+n, n)
	}
	if _, err := Prune(wal, 1, wal+".bak-20261105T000000Z", Companion(wal, dir)); err != nil {
		t.Fatal(err)
	}
	if got, _ := filepath.Glob(wal + ".bak-*"); !slices.Equal(got, []string{wal + ".bak-20261101T000000Z", wal + ".bak-20261105T000000Z"}) {
		t.Fatalf("WALs left %v", got)
	}
}

func TestHold(t *testing.T) {
	dir := t.TempDir()
	release, err := Hold(dir, "")
	if err != nil {
		t.Fatalf("a dir without a database: %v", err)
	}
	release()
	db := filepath.Join(dir, "member", "snap", "db")
	mkdir(t, filepath.Dir(db), "x")
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	// As bbolt locks an open database: another open file description.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := Hold(dir, ""); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "stop etcd first") {
		t.Fatalf("a held database: %v", err)
	}
	// The running member's member/ directory, and a directory that holds
	// its data dir, would be moved aside from under it too.
	for _, other := range []string{filepath.Join(dir, "member"), filepath.Join(dir, "member", "snap"), filepath.Dir(dir)} {
		if _, err := Hold(other, ""); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), dir) {
			t.Fatalf("%s, beside a held database: %v", other, err)
		}
	}
	_ = f.Close()
	release, err = Hold(dir, "")
	if err != nil {
		t.Fatalf("once released: %v", err)
	}
	release()
}
