package datadir

import (
	"os"
	"path/filepath"
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
