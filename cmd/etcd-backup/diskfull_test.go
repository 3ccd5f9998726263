package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/internal/etcdtest"
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
	if cat, err := snapshot.List(context.Background(), st); err != nil || len(cat) != 0 {
		t.Fatalf("listed after the failure: %v %v", cat, err)
	}
	if left := entries(t, disk); len(left) != 0 {
		t.Fatalf("left on the disk: %v", left)
	}
}

// Restores onto a disk that is too small, or that another writer fills
// while the restore runs: a clear error, the old data dir as it was, and
// nothing half-written beside it.
func TestDiskFullWhileRestoring(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	putMany(t, c.Client(t), 24<<10, "big")
	storeURL := "file://" + t.TempDir()
	ok(t, nil, "snapshot", "--store", storeURL, "--endpoints", c.Endpoints()[0])

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

	t.Run("filled while it runs", func(t *testing.T) {
		disk := smallDisk(t, 400)
		dataDir := filepath.Join(disk, "data")
		ok(t, nil, "restore", "--store", storeURL, "--data-dir", dataDir)
		old, err := validate.DataDir(ctx, dataDir, validate.Options{Mode: validate.Full})
		if err != nil || old.Verdict != validate.Valid {
			t.Fatalf("the first restore: %+v %v", old, err)
		}
		filled := false
		for attempt := 0; attempt < 5 && !filled; attempt++ {
			cmd := exec.Command(binary, "restore", "--store", storeURL, "--data-dir", dataDir)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Another writer takes every free byte as soon as the restore
			// starts building.
			ballast := filepath.Join(disk, "ballast")
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				if work, _ := filepath.Glob(dataDir + ".tmp-*"); len(work) > 0 {
					fill(t, ballast)
					break
				}
				time.Sleep(time.Millisecond)
			}
			err := cmd.Wait()
			_ = os.Remove(ballast)
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				// It finished before the disk filled: drop the data dir it
				// moved aside, which would starve the next attempt, and
				// try again.
				aside, _ := filepath.Glob(dataDir + ".bak-*")
				for _, a := range aside {
					_ = os.RemoveAll(a)
				}
				continue
			}
			filled = true
			if !strings.Contains(stderr.String(), "no space left on device") {
				t.Fatalf("the error does not say the disk is full:\n%s", stderr.String())
			}
			t.Log(strings.TrimSpace(stderr.String()))
		}
		if !filled {
			t.Fatal("in 5 attempts the restore always finished before the disk filled")
		}
		rep, err := validate.DataDir(ctx, dataDir, validate.Options{Mode: validate.Full})
		if err != nil || rep.Verdict != validate.Valid {
			t.Fatalf("the old data dir after the failure: %+v %v", rep, err)
		}
		for _, name := range entries(t, disk) {
			if name != "data" && !strings.HasPrefix(name, "data.bak-") {
				t.Errorf("left beside the data dir: %s", name)
			}
		}
		// With the space back, the next restore succeeds.
		ok(t, nil, "restore", "--store", storeURL, "--data-dir", dataDir)
	})
}

// fill writes path until the disk is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}
