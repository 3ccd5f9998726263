package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/validate"
)

// smallDisk mounts a tmpfs of mib MiB: a disk that fills for real. It
// needs root; CI (ETCDKIT_REQUIRE_EMULATORS=1) runs as root and fails
// without it, elsewhere the test is skipped.
func smallDisk(t *testing.T, mib int) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(mib)+"m", "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := "mounting a small tmpfs needs root: " + strings.TrimSpace(string(out))
		if os.Getenv("ETCDKIT_REQUIRE_EMULATORS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; skipping")
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// A store on a disk too small for the snapshot: the spool fills it, the
// command says so, and nothing is listed or left behind.
func TestDiskFullWhileSpooling(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	putMany(t, c.Client(t), 24<<10, "big")
	disk := smallDisk(t, 8)
	r := etcdBackup(t, []string{"TMPDIR=" + disk}, "snapshot", "--store", "file://"+disk, "--endpoints", c.Endpoints()[0])
	if r.code != exitFailed || !strings.Contains(r.stderr, "no space left on device") {
		t.Fatalf("snapshot onto a full disk: exit %d\n%s", r.code, r.stderr)
	}
	t.Log(strings.TrimSpace(r.stderr))
	st, err := store.Open(context.Background(), "file://"+disk)
	if err != nil {
		t.Fatal(err)
	}
	if cat, err := snapshot.List(context.Background(), st); err != nil || len(cat.Snapshots) != 0 {
		t.Fatalf("listed after the failure: %v %v", cat, err)
	}
	if left := entries(t, disk); len(left) != 0 {
		t.Fatalf("left on the disk: %v", left)
	}
}

// A restore onto a disk too small for it is refused before it writes
// anything, with what it needs; one that the disk cannot hold although the
// estimate said it could fails cleanly part-way and leaves the old data dir.
func TestDiskFullWhileRestoring(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	storeURL := "file://" + t.TempDir()
	snap := func() {
		ok(t, nil, "snapshot", "--compression", "zstd", "--store", storeURL, "--endpoints", c.Endpoints()[0])
	}
	resp, err := cli.Put(ctx, "/small", "before")
	if err != nil {
		t.Fatal(err)
	}
	small := resp.Header.Revision
	snap()
	// About 100 MiB of zeros, which zstd stores in a few hundred KiB: far
	// more growth than the 4 times the space check assumes of compressed
	// snapshots, so the check passes and only the writes find the disk
	// full.
	zeros := strings.Repeat("\x00", 512<<10)
	for i := range 200 {
		if _, err := cli.Put(ctx, "/big/"+strconv.Itoa(i), zeros); err != nil {
			t.Fatal(err)
		}
	}
	snap()

	t.Run("too small from the start", func(t *testing.T) {
		disk := smallDisk(t, 64)
		r := etcdBackup(t, nil, "restore", "--store", storeURL, "--data-dir", filepath.Join(disk, "data"))
		if r.code != exitFailed || !strings.Contains(r.stderr, "not enough free disk space") {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		t.Log(strings.TrimSpace(r.stderr))
		if left := entries(t, disk); len(left) != 0 {
			t.Fatalf("left on the disk: %v", left)
		}
	})

	t.Run("full part-way", func(t *testing.T) {
		// Room for the space check (about 130 MiB once the first data
		// dir's 64 MB WAL is there), not for the 100 MiB database and the
		// new WAL: the restore writes the database once, into the new
		// data dir, so a disk that holds it and the WAL twice would not
		// fill.
		disk := smallDisk(t, 208)
		dataDir := filepath.Join(disk, "data")
		ok(t, nil, "restore", "--store", storeURL, "--data-dir", dataDir, "--revision", strconv.FormatInt(small, 10), "--revision-bump", "0")
		r := etcdBackup(t, nil, "restore", "--store", storeURL, "--data-dir", dataDir)
		if r.code != exitFailed || !strings.Contains(r.stderr, "no space left on device") || !strings.Contains(r.stderr, dataDir) {
			t.Fatalf("restore onto a disk that fills: exit %d\n%s", r.code, r.stderr)
		}
		t.Log(strings.TrimSpace(r.stderr))
		rep, err := validate.DataDir(ctx, dataDir, validate.Options{Mode: validate.Full})
		if err != nil || rep.Verdict != validate.Valid || rep.Revision != small {
			t.Fatalf("old data dir after the failure: %+v %v, want valid at %d", rep, err, small)
		}
		if left := entries(t, disk); len(left) != 1 {
			t.Fatalf("left on the disk besides the data dir: %v", left)
		}
		// With room made, the same restore goes through.
		if out, err := exec.Command("mount", "-o", "remount,size=1g", disk).CombinedOutput(); err != nil {
			t.Fatalf("grow the tmpfs: %v %s", err, out)
		}
		ok(t, nil, "restore", "--store", storeURL, "--data-dir", dataDir)
		rep, err = validate.DataDir(ctx, dataDir, validate.Options{Mode: validate.Full})
		if err != nil || rep.Verdict != validate.Valid || rep.Revision <= small {
			t.Fatalf("data dir after the retry: %+v %v", rep, err)
		}
	})
}
