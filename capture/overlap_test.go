package capture_test

import (
	"testing"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/snapshot"
)

// Two uploaders overlap after a leader moves: the old one wrote a delta
// while the new one placed its backups, and the new one wrote its own
// from the same revision on. The next uploader continues the chain they
// left: both deltas hold the cluster's own revisions.
func TestPlaceContinuesOverlappingDeltas(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	st := newStore(t)
	if _, err := (etcdtest.Workload{Ops: 50, Seed: 21}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	full, err := capture.Full(ctx, cli, st, snapshot.FullOptions{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (etcdtest.Workload{Ops: 50, Seed: 22}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	old, err := capture.Delta(ctx, cli, st, full.LastRevision, capture.DeltaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := (etcdtest.Workload{Ops: 50, Seed: 23}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	newer, err := capture.Delta(ctx, cli, st, full.LastRevision, capture.DeltaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("deltas %v and %v", old, newer)
	lin, _, err := capture.Place(ctx, cli, st, capture.PlaceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !lin.Continues || lin.Began {
		t.Fatalf("after overlapping deltas to revision %d: %+v", res.LastRevision, lin)
	}
}
