package datadir

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func rssFile(t *testing.T) int64 {
	t.Helper()
	n, err := ResidentFile()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A file mapped read-only, as bbolt maps a database, and read whole counts
// in the resident set until ReleaseMapped; its content reads the same after.
func TestReleaseMappedDropsTheResidentPages(t *testing.T) {
	const size = 64 << 20
	path := filepath.Join(t.TempDir(), "db")
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i / 4096)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Munmap(m) }()
	before := rssFile(t)
	if err := ReleaseMapped(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
	after := rssFile(t)
	if before-after < size/2 {
		t.Fatalf("file-backed resident %d MiB before, %d MiB after: the mapping's pages were not released", before>>20, after>>20)
	}
	for i := 0; i < size; i += 4096 {
		if m[i] != byte(i/4096) {
			t.Fatalf("byte %d reads %d after the release", i, m[i])
		}
	}
}
