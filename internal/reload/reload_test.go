package reload

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestReloadsAChangeAndKeepsTheLastGoodValue(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	loads := 0
	f := New(func() (string, error) {
		loads++
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		if strings.TrimSpace(string(b)) == "" {
			return "", errors.New("empty")
		}
		return string(b), nil
	}, nil, path)
	if _, err := f.Get(); err == nil {
		t.Fatal("a missing file loaded")
	}
	write(t, path, "one")
	if v, err := f.Get(); err != nil || v != "one" {
		t.Fatalf("first load: %q, %v", v, err)
	}
	before := loads
	if v, _ := f.Get(); v != "one" || loads != before {
		t.Fatalf("an unchanged file was loaded again (%d loads) or changed value %q", loads-before, v)
	}
	// A new file swapped in, as a Secret volume does, with the same size
	// and possibly the same modification time.
	next := filepath.Join(dir, "next")
	write(t, next, "two")
	if err := os.Rename(next, path); err != nil {
		t.Fatal(err)
	}
	if v, err := f.Get(); err != nil || v != "two" {
		t.Fatalf("after the swap: %q, %v", v, err)
	}
	// A change that does not load keeps the last good value.
	write(t, path, " ")
	if v, err := f.Get(); err != nil || v != "two" {
		t.Fatalf("after a bad change: %q, %v", v, err)
	}
	// So does a file missing mid-rotation.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if v, err := f.Get(); err != nil || v != "two" {
		t.Fatalf("with the file missing: %q, %v", v, err)
	}
	write(t, path, "three")
	now := time.Now().Add(time.Second)
	if err := os.Chtimes(path, now, now); err != nil {
		t.Fatal(err)
	}
	if v, err := f.Get(); err != nil || v != "three" {
		t.Fatalf("after the fix: %q, %v", v, err)
	}
}
