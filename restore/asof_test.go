package restore_test

import (
	"context"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// A restore as of a time stops at the last revision received by then.
func TestRestoreAsOfATime(t *testing.T) {
	ctx := context.Background()
	m := etcdtest.Start(t, etcdtest.Options{})
	cli := m.Client(t)
	st, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	full, err := capture.Full(ctx, cli, st, snapshot.FullOptions{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	since := full.LastRevision
	var cut time.Time
	var want int64
	for i := range 3 {
		if _, err := (etcdtest.Workload{Ops: 30, Seed: uint64(30 + i)}).Run(ctx, cli); err != nil {
			t.Fatal(err)
		}
		written, err := capture.Delta(ctx, cli, st, since, capture.DeltaOptions{})
		if err != nil {
			t.Fatal(err)
		}
		since = written[len(written)-1].LastRevision
		if i == 1 {
			want = since
			cut = time.Now()
		}
		// Names carry seconds: the next delta is created a second later.
		time.Sleep(1100 * time.Millisecond)
	}
	rep, err := history.Verify(ctx, st, history.VerifyOptions{Read: restore.ReadOptions{Target: restore.Target{Time: cut}}})
	if err != nil {
		t.Fatal(err)
	}
	live, err := history.LiveDigest(ctx, cli, want)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Digest != live {
		t.Fatalf("as of the cut: %+v, live at %d: %+v", rep.Digest, want, live)
	}
}
