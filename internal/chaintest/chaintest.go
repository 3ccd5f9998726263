package chaintest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// Options says what else to require.
type Options struct {
	// Current: the chain must reach the cluster's current revision (every
	// event was uploaded before the writers stopped).
	Current bool
}

// Check fails the test unless the latest chain on st has no gap and its
// replay sums to what cli's cluster held at the chain's revision. It
// returns the chain as the store holds it (before the gap check trims
// overlaps) and the verification.
func Check(t testing.TB, st store.Store, cli *clientv3.Client, o Options) (snapshot.Chain, history.Report) {
	t.Helper()
	ctx := context.Background()
	chain := Latest(t, st)
	if _, err := chain.Check(); err != nil {
		t.Fatalf("the latest chain: %v", err)
	}
	rep, err := history.Verify(ctx, st, history.VerifyOptions{WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	live, err := history.LiveDigest(ctx, cli, rep.Digest.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if live != rep.Digest {
		t.Fatalf("at revision %d the backup sums %+v, the cluster %+v", rep.Digest.Revision, rep.Digest, live)
	}
	if o.Current {
		now, err := cli.Get(ctx, "chaintest")
		if err != nil {
			t.Fatal(err)
		}
		if rep.Digest.Revision != now.Header.Revision {
			t.Fatalf("the backup ends at revision %d, the cluster is at %d: the last events were not uploaded", rep.Digest.Revision, now.Header.Revision)
		}
	}
	return chain, rep
}

// Latest is the store's latest chain, or fails the test.
func Latest(t testing.TB, st store.Store) snapshot.Chain {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := cat.Latest()
	if err != nil {
		t.Fatal(err)
	}
	return chain
}

// BackedUp is a member's backups on a file store: a full and deltas.
func BackedUp(t *testing.T, c snapshot.Codec) (*store.File, string) {
	t.Helper()
	// Every call below has the test run's deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	m := etcdtest.Start(t, etcdtest.Options{})
	cli := m.Client(t)
	dir := t.TempDir()
	st, err := store.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (etcdtest.Workload{Ops: 100, Seed: 1}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	full, err := capture.Full(ctx, cli, st, snapshot.FullOptions{Codec: c, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	since := full.LastRevision
	for i := range 3 {
		if _, err := (etcdtest.Workload{Ops: 50, Seed: uint64(2 + i), TxnPercent: 20}).Run(ctx, cli); err != nil {
			t.Fatal(err)
		}
		written, err := capture.Delta(ctx, cli, st, since, capture.DeltaOptions{Codec: c})
		if err != nil {
			t.Fatal(err)
		}
		since = written[len(written)-1].LastRevision
	}
	return st, dir
}
