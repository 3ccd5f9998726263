package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/chaintest"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/validate"
)

// trials is how many times each fault is injected: twice in CI, 50 with
// ETCDKIT_LONG=1.
func trials() int {
	if os.Getenv("ETCDKIT_LONG") == "1" {
		return 50
	}
	return 2
}

// killedAt runs etcd-backup and sends SIGKILL after delay, unless it ended
// first; it says whether the kill landed.
func killedAt(t *testing.T, delay time.Duration, args ...string) bool {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("etcd-backup %s failed before the kill: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return false
	case <-time.After(delay):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		if err := <-done; err == nil {
			// It ended just before the signal.
			return false
		}
		return true
	}
}

// timed runs etcd-backup to its end and returns how long it took.
func timed(t *testing.T, args ...string) time.Duration {
	t.Helper()
	start := time.Now()
	ok(t, nil, args...)
	return time.Since(start)
}

// complete reads every listed object not read before to its end, through
// its checksum: a partial object must never be listed.
func complete(t *testing.T, st store.Store, seen map[string]bool) {
	t.Helper()
	ctx := context.Background()
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cat.Snapshots {
		if seen[s.Key] {
			continue
		}
		rc, err := snapshot.Open(ctx, st, s, snapshot.Codec{})
		if err == nil {
			_, err = io.Copy(io.Discard, rc)
			_ = rc.Close()
		}
		if err != nil {
			t.Fatalf("listed object %s is not whole: %v", s.Key, err)
		}
		seen[s.Key] = true
	}
}

func putMany(t *testing.T, cli *clientv3.Client, n int, tag string) {
	t.Helper()
	value := strings.Repeat("v", 1024)
	for i := 0; i < n; i += 100 {
		var ops []clientv3.Op
		for j := i; j < min(n, i+100); j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/fault/%s/%05d", tag, j), value))
		}
		if _, err := cli.Txn(context.Background()).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// SIGKILL at random points of a full upload, a delta upload, retention and
// compaction: no partial object is ever listed, the next run succeeds, and
// the latest chain restores to the live keyspace.
func TestKilledMidOperation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	eps := strings.Join(c.Endpoints(), ",")
	// A 24 MiB database makes each operation last long enough to be cut.
	putMany(t, cli, 24<<10, "base")
	dir := t.TempDir()
	storeURL := "file://" + dir
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	base := []string{"--store", storeURL, "--endpoints", eps, "--compression", "gzip"}
	compactWork := t.TempDir()
	n := trials()

	ops := []struct {
		name    string
		prepare func(i int)
		args    []string
	}{
		{"full upload", func(int) {}, append([]string{"snapshot"}, base...)},
		{"delta upload", func(i int) { putMany(t, cli, 3000, fmt.Sprintf("delta%d", i)) }, append([]string{"snapshot", "--delta"}, base...)},
		// A chain of a full and 20 deltas for retention to delete, and the
		// newer full that expires it.
		{"retention", func(i int) {
			if _, err := capture.Full(ctx, cli, st, snapshot.FullOptions{}); err != nil {
				t.Fatal(err)
			}
			for j := range 20 {
				putMany(t, cli, 10, fmt.Sprintf("gc%d-%d", i, j))
				chain := chaintest.Latest(t, st)
				if _, err := capture.Delta(ctx, cli, st, chain.LastRevision(), capture.DeltaOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := capture.Full(ctx, cli, st, snapshot.FullOptions{}); err != nil {
				t.Fatal(err)
			}
		}, []string{"gc", "--store", storeURL, "--retention-policy", "limit-based", "--max-fulls", "1"}},
		{"compaction", func(i int) {
			putMany(t, cli, 2000, fmt.Sprintf("compact%d", i))
			timed(t, append([]string{"snapshot", "--delta"}, base...)...)
		}, append([]string{"compact", "--work-dir", compactWork}, base...)},
	}
	timed(t, append([]string{"snapshot"}, base...)...)
	for _, op := range ops {
		op.prepare(-1)
		// A run's length varies with the machine's load: the kills aim
		// within the shortest run seen so far, and the trials go on until
		// one kill has landed mid-run (at most four times as many).
		whole := timed(t, op.args...)
		kills, i := 0, 0
		for ; i < n || kills == 0 && i < 4*n; i++ {
			op.prepare(i)
			delay := time.Duration(r.Int64N(int64(whole)))
			if killedAt(t, delay, op.args...) {
				kills++
			}
			complete(t, st, seen)
			// The next run succeeds.
			op.prepare(1000 + i)
			whole = min(whole, timed(t, op.args...))
			complete(t, st, seen)
		}
		t.Logf("%s: %d trials, %d killed mid-run (the shortest uninterrupted run took %s)", op.name, i, kills, whole.Round(time.Millisecond))
		if kills == 0 {
			t.Errorf("%s: no trial was killed before it ended", op.name)
		}
	}
	// The latest chain restores to what the cluster held at its revision.
	chaintest.Check(t, st, cli, chaintest.Options{})

	// What killed runs were writing is gone once the next run finds it
	// old enough to be nobody's (5 s).
	time.Sleep(6 * time.Second)
	ok(t, nil, append([]string{"snapshot"}, base...)...)
	ok(t, nil, append([]string{"compact", "--work-dir", compactWork}, base...)...)
	for _, pattern := range []string{filepath.Join(dir, ".etcdkit-tmp-*"), filepath.Join(compactWork, "etcdkit-compact-*")} {
		if left, _ := filepath.Glob(pattern); len(left) > 0 {
			t.Errorf("killed runs left %d files behind: %v", len(left), left)
		}
	}
}

// SIGKILL at random points of a restore over an existing data dir: the
// data dir is at every moment the old one or the new one, and the next
// restore succeeds.
func TestKilledMidRestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	eps := strings.Join(c.Endpoints(), ",")
	putMany(t, cli, 16<<10, "base")
	storeURL := "file://" + t.TempDir()
	ok(t, nil, "snapshot", "--store", storeURL, "--endpoints", eps)
	dataDir := filepath.Join(t.TempDir(), "data")
	args := []string{"restore", "--store", storeURL, "--data-dir", dataDir}
	ok(t, nil, args...)
	old, err := validate.DataDir(ctx, dataDir, validate.Options{Mode: validate.Full})
	if err != nil || old.Verdict != validate.Valid {
		t.Fatalf("the first restore: %+v %v", old, err)
	}
	putMany(t, cli, 4000, "more")
	ok(t, nil, "snapshot", "--delta", "--store", storeURL, "--endpoints", eps)
	whole := timed(t, args...)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	// As in TestKilledMidOperation: aimed within the shortest run, until
	// a kill lands.
	kills, n := 0, 0
	for ; n < trials() || kills == 0 && n < 4*trials(); n++ {
		if killedAt(t, time.Duration(r.Int64N(int64(whole))), args...) {
			kills++
		}
		rep, err := validate.DataDir(ctx, dataDir, validate.Options{Mode: validate.Full})
		if err != nil || rep.Verdict != validate.Valid {
			t.Fatalf("after a killed restore the data dir is %+v (%v)", rep, err)
		}
		whole = min(whole, timed(t, args...))
		rep, err = validate.DataDir(ctx, dataDir, validate.Options{Mode: validate.Full})
		if err != nil || rep.Verdict != validate.Valid || rep.Revision <= old.Revision {
			t.Fatalf("the restore after a kill: %+v (%v)", rep, err)
		}
	}
	if kills == 0 {
		t.Error("no restore was killed before it ended")
	}
	// What killed restores were building is gone once a restore succeeds.
	if left, _ := filepath.Glob(dataDir + ".tmp-*"); len(left) > 0 {
		t.Errorf("killed restores left their work behind: %v", left)
	}
	t.Logf("%d of %d restores killed mid-run (the shortest uninterrupted one took %s)", kills, n, whole.Round(time.Millisecond))
}
