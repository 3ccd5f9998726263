package compact_test

import (
	"context"
	"testing"

	"github.com/etcdkit/etcdkit/compact"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/internal/chaintest"
	"github.com/etcdkit/etcdkit/snapshot"
)

// A chain compacted into one full snapshot restores to the same keyspace.
func TestCompactedChainRestoresTheSame(t *testing.T) {
	ctx := context.Background()
	st, _ := chaintest.BackedUp(t, snapshot.Codec{Compression: snapshot.Gzip})
	before, err := history.Verify(ctx, st, history.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Chain.Deltas) == 0 {
		t.Fatal("no deltas to compact")
	}
	c, err := compact.Compact(ctx, st, compact.Options{Full: snapshot.FullOptions{Codec: snapshot.Codec{Compression: snapshot.Zstd}}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Snapshot.LastRevision != before.Digest.Revision || c.Snapshot.Compression != snapshot.Zstd || c.InputBytes == 0 || c.OutputBytes == 0 {
		t.Fatalf("compaction %+v", c)
	}
	after, err := history.Verify(ctx, st, history.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Chain.Full.Key != c.Snapshot.Key || len(after.Chain.Deltas) != 0 {
		t.Fatalf("the latest chain is %v, not the compacted full alone", after.Chain.Snapshots())
	}
	if after.Digest != before.Digest {
		t.Fatalf("compacted %+v, chain %+v", after.Digest, before.Digest)
	}
	// The new full's identity says what its own end left of the keys (a
	// sidecar compares its cluster with it), not what the old full's did.
	id, ok, err := snapshot.ReadIdentity(ctx, st, c.Snapshot)
	if err != nil || !ok {
		t.Fatalf("the compacted full's identity: %v, %v", ok, err)
	}
	newest := int64(0)
	for _, kv := range id.Tail {
		newest = max(newest, kv.Mod)
	}
	if newest <= before.Chain.Full.LastRevision {
		t.Fatalf("the compacted full's identity names keys up to revision %d, the old full's end (%d), not its own (%d)", newest, before.Chain.Full.LastRevision, c.Snapshot.LastRevision)
	}
	// The inputs stay.
	cat, _ := snapshot.List(ctx, st)
	if len(cat.Snapshots) != len(before.Chain.Snapshots())+1 {
		t.Fatalf("%d objects after compaction, want %d", len(cat.Snapshots), len(before.Chain.Snapshots())+1)
	}
}
