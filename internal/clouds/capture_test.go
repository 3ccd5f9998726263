package clouds_test

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// Two uploaders of one cluster on one prefix (a second sidecar beside the
// leader): the one that began last writes, the other stops before its
// next object and says which uploader it yields to; the chain they left
// replays to the live keyspace.
func TestTwoUploadersOnOnePrefix(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx := ctxT(t)
		c := etcdtest.Start(t, etcdtest.Options{TLS: true, UnsafeNoFsync: true})
		cli := c.Client(t)
		if _, err := (etcdtest.Workload{Ops: 100, Seed: 50}).Run(ctx, cli); err != nil {
			t.Fatal(err)
		}
		first := start(t, cli, st, capture.Options{DeltaPeriod: 50 * time.Millisecond})
		first.Await(t, capture.OpFull)
		second := start(t, cli, st, capture.Options{DeltaPeriod: 50 * time.Millisecond})
		etcdtest.Eventually(t, "the second uploader starts", 30*time.Second, func() bool { return second.Status().LastRevision > 0 })
		res, err := (etcdtest.Workload{Ops: 150, Seed: 51, DeletePercent: 10}).Run(ctx, cli)
		if err != nil {
			t.Fatal(err)
		}
		etcdtest.Eventually(t, "the first refuses and the second reaches the end", 60*time.Second, func() bool {
			return first.Status().Refused == capture.RefusedConflict && second.Status().LastRevision >= res.LastRevision
		})
		if msg := first.Status().LastError; !strings.Contains(msg, "etcdkit/uploaders/0000000002.json") || !strings.Contains(msg, "began after this one") {
			t.Fatalf("the first uploader's refusal says: %s", msg)
		}
		if st := second.Status(); st.Refused != "" || st.LastError != "" {
			t.Fatalf("the second uploader: %+v", st)
		}
		first.Stop(t)
		second.Stop(t)
		if chain := checkChain(t, cli, st, snapshot.Codec{}); chain.LastRevision() < res.LastRevision {
			t.Fatalf("the chain ends at %d, the workload at %d", chain.LastRevision(), res.LastRevision)
		}
	})
}

func TestSnapshotterFullThenDeltasByPeriod(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) {
		ctx := ctxT(t)
		c := etcdtest.Start(t, etcdtest.Options{})
		cli := c.Client(t)
		if _, err := (etcdtest.Workload{Ops: 200, Seed: 4}).Run(ctx, cli); err != nil {
			t.Fatal(err)
		}
		codec := snapshot.Codec{Compression: snapshot.Zstd}
		r := start(t, cli, st, capture.Options{DeltaPeriod: 200 * time.Millisecond, Codec: codec})
		if res := r.Await(t, capture.OpFull); res.Reason != "no full snapshot" {
			t.Fatalf("first full: reason %q", res.Reason)
		}
		var res etcdtest.Result
		for i := range 2 {
			var err error
			res, err = (etcdtest.Workload{Ops: 150, Seed: 5 + uint64(i), TxnPercent: 20, DeletePercent: 10, LeasePercent: 10}).Run(ctx, cli)
			if err != nil {
				t.Fatal(err)
			}
			for r.Status().LastRevision < res.LastRevision {
				if d := r.Await(t, capture.OpDelta); d.Reason != "period" {
					t.Fatalf("delta written for %q", d.Reason)
				}
			}
		}
		r.Stop(t)
		chain := checkChain(t, cli, st, codec)
		if chain.LastRevision() != res.LastRevision || len(chain.Deltas) < 2 {
			t.Fatalf("chain ends at %d with %d deltas; the workload ended at %d", chain.LastRevision(), len(chain.Deltas), res.LastRevision)
		}
	})
}
