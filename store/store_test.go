package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/storetest"
)

func TestFileConformance(t *testing.T) {
	root := t.TempDir()
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T, prefix string) store.Store {
			st, err := store.Open(context.Background(), "file://"+filepath.ToSlash(filepath.Join(root, prefix)))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	})
}

func TestMemConformance(t *testing.T) {
	mem := store.NewMem()
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T, prefix string) store.Store {
			st, err := store.WithPrefix(mem, prefix)
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		HoldsObjects: true,
	})
}

func TestFileHidesTemporaryFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "v2/Full-1", strings.NewReader("full")); err != nil {
		t.Fatal(err)
	}
	// What a process killed in the middle of a Put leaves behind.
	if err := os.WriteFile(filepath.Join(dir, "v2", ".etcdkit-tmp-123"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	objs, err := st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].Key != "v2/Full-1" {
		t.Fatalf("list shows %+v, want only v2/Full-1", objs)
	}
	if err := st.Put(ctx, "v2/.etcdkit-tmp-x", strings.NewReader("x")); !errors.Is(err, store.ErrInvalidKey) {
		t.Fatalf("put under a temporary name: %v, want ErrInvalidKey", err)
	}
	// Nothing outside the root is reachable.
	if err := st.Put(ctx, "../outside", strings.NewReader("x")); !errors.Is(err, store.ErrInvalidKey) {
		t.Fatalf("put ../outside: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "outside")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file was written outside the store: %v", err)
	}
}

func TestFileCreatesDirectories(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "not", "yet")
	st, err := store.Open(ctx, dir) // a bare path is a file store
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "a/b/c/d", strings.NewReader("deep")); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "a", "b", "c", "d"))
	if err != nil || string(data) != "deep" {
		t.Fatalf("file on disk: %q, %v", data, err)
	}
	// A key below an object is simply missing, not an error of the disk.
	if _, err := st.Get(ctx, "a/b/c/d/e"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get below an object: %v, want ErrNotFound", err)
	}
}

func TestOpenRejectsBadURLs(t *testing.T) {
	ctx := context.Background()
	for url, want := range map[string]string{
		"":                            "empty URL",
		"ftp://host/x":                "unknown scheme",
		"file://host/x":               "three slashes",
		"file:///tmp/x?typo=1":        "unknown option(s) typo",
		"mem://x/../y":                "..",
		"s3-without-import://b/p":     "unknown scheme",
		"file:///tmp/x?part-size=abc": "unknown option(s) part-size",
		"s3:/bucket/p":                "not a URL: write s3://",
		"gs:bucket":                   "not a URL: write gs://",
	} {
		_, err := store.Open(ctx, url)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("open %q: %v, want an error saying %q", url, err, want)
		}
	}
}

func TestCheckKey(t *testing.T) {
	for _, ok := range []string{"a", "v2/Full-00000001-00000002-3.gz", "a.b/c_d-e", "x/.hidden"} {
		if err := store.CheckKey(ok); err != nil {
			t.Errorf("CheckKey(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/a", "a/", "a//b", "..", "a/./b", `a\b`, "a\nb"} {
		if err := store.CheckKey(bad); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("CheckKey(%q) = %v, want ErrInvalidKey", bad, err)
		}
	}
	for _, ok := range []string{"", "v2/", "v2/Fu"} {
		if err := store.CheckPrefix(ok); err != nil {
			t.Errorf("CheckPrefix(%q): %v", ok, err)
		}
	}
}

func TestLocation(t *testing.T) {
	l, err := store.NewLocation("s3", "b", "/backups/etcd/", "bucket")
	if err != nil {
		t.Fatal(err)
	}
	if l.String() != "s3://b/backups/etcd" {
		t.Fatalf("String() = %q", l)
	}
	if name, err := l.Object("v2/Full-1"); err != nil || name != "backups/etcd/v2/Full-1" {
		t.Fatalf("Object = %q, %v", name, err)
	}
	if _, err := l.Object("../x"); !errors.Is(err, store.ErrInvalidKey) || !strings.Contains(err.Error(), "s3://b/backups/etcd") {
		t.Fatalf("Object(../x) = %v, want ErrInvalidKey naming the store", err)
	}
	if p, err := l.ListPrefix("v2/"); err != nil || p != "backups/etcd/v2/" {
		t.Fatalf("ListPrefix = %q, %v", p, err)
	}
	if k := l.Key("backups/etcd/v2/Full-1"); k != "v2/Full-1" {
		t.Fatalf("Key = %q", k)
	}
	root, _ := store.NewLocation("gs", "b", "", "bucket")
	if p, _ := root.ListPrefix("v2/"); p != "v2/" || root.Key("v2/x") != "v2/x" || root.String() != "gs://b" {
		t.Fatalf("root location: %q %q %q", p, root.Key("v2/x"), root)
	}
	if _, err := store.NewLocation("azblob", "", "p", "container"); err == nil || !strings.Contains(err.Error(), "no container") {
		t.Fatalf("no container: %v", err)
	}
	odd, _ := store.NewLocation("s3", "b", "a#b/c?d/e%f g", "bucket")
	if odd.String() != "s3://b/a%23b/c%3Fd/e%25f%20g" {
		t.Fatalf("a prefix with URL syntax prints as %q", odd)
	}
}

// The name a file store gives itself in messages opens the same
// directory, whatever characters its path holds.
func TestFileNameOpensItself(t *testing.T) {
	ctx := context.Background()
	st, err := store.NewFile(filepath.Join(t.TempDir(), "a#b?c%d e"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "k", strings.NewReader("v")); err != nil {
		t.Fatal(err)
	}
	again, err := store.Open(ctx, st.String())
	if err != nil {
		t.Fatal(err)
	}
	r, err := again.Get(ctx, "k")
	if err != nil {
		t.Fatalf("%s opened as %s: %v", st, again, err)
	}
	_ = r.Close()
	if fmt.Sprint(again) != st.String() {
		t.Fatalf("%s opens as %s", st, again)
	}
}

// A writer killed mid-Put leaves a temporary file in the key's directory,
// one killed mid-snapshot a staged file in the root: Sweep removes them
// once their writer is gone, and never a live writer's.
func TestFileSweepsDeadWritersFiles(t *testing.T) {
	dir := t.TempDir()
	st, err := store.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	live, err := st.Stage()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = live.Close() }()
	if err := os.MkdirAll(filepath.Join(dir, "v2"), 0o700); err != nil {
		t.Fatal(err)
	}
	dead := []string{filepath.Join(dir, ".etcdkit-tmp-1"), filepath.Join(dir, "v2", ".etcdkit-tmp-2")}
	old := time.Now().Add(-time.Hour)
	for _, p := range append(dead, live.Name()) {
		if p != live.Name() {
			if err := os.WriteFile(p, []byte("half"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	pst, err := store.WithPrefix(st, "x")
	if err != nil {
		t.Fatal(err)
	}
	sw, ok := store.AsSweeper(pst)
	if !ok {
		t.Fatal("a prefixed file store is no Sweeper")
	}
	sw.Sweep()
	for _, p := range dead {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived the sweep: %v", p, err)
		}
	}
	if _, err := os.Stat(live.Name()); err != nil {
		t.Fatalf("a live writer's staged file was swept: %v", err)
	}
}
