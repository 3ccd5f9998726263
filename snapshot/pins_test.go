package snapshot_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// chains is four chains a day apart, each a full with two deltas, the
// last taken at now.
func chains(now time.Time) []snapshot.Snapshot {
	var snaps []snapshot.Snapshot
	for i := range 4 {
		at, rev := now.Add(time.Duration(i-3)*24*time.Hour), int64(100*i+10)
		snaps = append(snaps, full(rev, at), delta(rev+1, rev+10, at.Add(time.Minute)), delta(rev+11, rev+20, at.Add(2*time.Minute)))
	}
	return snaps
}

// A pinned chain is kept whole by every policy, whatever it expires;
// pinning a delta pins its chain's full; a pin is create-only, and gone
// once unpinned.
func TestPinKeepsItsChain(t *testing.T) {
	ctx := t.Context()
	now := t0.Add(100 * 24 * time.Hour)
	st := store.NewMem()
	snaps := chains(now)
	putAll(ctx, t, st, snaps)
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	// The second chain's first delta names it.
	p, err := snapshot.PinChain(ctx, st, cat, snaps[4].Key, "before-upgrade", "ops@host")
	if err != nil || p.Snapshot != snaps[3].Key {
		t.Fatalf("pin %s: %+v, %v", snaps[4].Key, p, err)
	}
	if _, err := snapshot.PinChain(ctx, st, cat, snaps[3].Key, "other", "ops@host"); err == nil {
		t.Fatal("a second pin of one chain was taken")
	}
	pins, err := snapshot.ReadPins(ctx, st)
	if err != nil || len(pins) != 1 || pins[snaps[3].Key].Label != "before-upgrade" {
		t.Fatalf("pins %+v, %v", pins, err)
	}
	for _, r := range []snapshot.Retention{
		{Policy: snapshot.LimitBased, MaxFulls: 1, DeltaRetention: time.Second}, {Policy: snapshot.Calendar, Hourly: 1},
	} {
		plan, err := snapshot.GC(ctx, st, r, snapshot.GCOptions{DryRun: true, Now: func() time.Time { return now.Add(time.Hour) }})
		if err != nil {
			t.Fatal(err)
		}
		// Kept: the pinned chain and the newest, each whole.
		want := append(slices.Clone(snaps[3:6]), snaps[9:]...)
		var kept []snapshot.Snapshot
		for _, k := range plan.Kept {
			kept = append(kept, k.Snapshot)
			if k.Snapshot.Key == snaps[3].Key && (k.Pin == nil || !slices.Contains(k.Rules, "pinned: before-upgrade")) {
				t.Errorf("%+v: the pinned full kept for %q", r, k.Rules)
			}
		}
		if keys(kept) != keys(want) {
			t.Errorf("%+v kept %s, want %s", r, keys(kept), keys(want))
		}
	}
	// A second site's GC keeps the first site's pins; the deltas of the
	// third full, expired, go with it even with no DeltaRetention: a pin
	// keeps its own chain, not every delta after it, and the chain it
	// keeps restores whole.
	second := store.NewMem()
	putAll(ctx, t, second, snaps)
	res, err := snapshot.GC(ctx, second, snapshot.Retention{Policy: snapshot.LimitBased, MaxFulls: 1}, snapshot.GCOptions{Now: func() time.Time { return now }, Pins: pins})
	if err != nil || keys(res.Deleted) != keys(append(slices.Clone(snaps[:3]), snaps[6:9]...)) {
		t.Fatalf("the second site's GC with the first's pins deleted %s, %v", keys(res.Deleted), err)
	}
	after, err := snapshot.List(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range after.Chains() {
		if _, err := c.Check(); err != nil {
			t.Fatalf("after GC, the chain of %s: %v", c.Full.Key, err)
		}
	}
	if was, err := snapshot.Unpin(ctx, st, cat, snaps[5].Key); err != nil || !was {
		t.Fatalf("unpin: %v, %v", was, err)
	}
	if was, err := snapshot.Unpin(ctx, st, cat, snaps[5].Key); err != nil || was {
		t.Fatalf("unpin again: %v, %v", was, err)
	}
	if pins, err := snapshot.ReadPins(ctx, st); err != nil || len(pins) != 0 {
		t.Fatalf("after unpin: %+v, %v", pins, err)
	}
	if _, err := snapshot.PinChain(ctx, st, cat, "v2/Full-00000000-00000001-1", "", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("pin of a missing snapshot: %v", err)
	}
}

// Deletes by hand: a named full goes with its chain; a delta, the newest
// chain and a pinned chain are refused and nothing goes; before a time,
// the newest and the pinned chains are spared; a record is written
// first; a dry run deletes nothing; a lock keeps a full and its chain.
func TestDeleteChains(t *testing.T) {
	ctx := t.Context()
	now := t0.Add(100 * 24 * time.Hour)
	mem := store.NewMem()
	snaps := chains(now)
	putAll(ctx, t, mem, snaps)
	cat, err := snapshot.List(ctx, mem)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.PinChain(ctx, mem, cat, snaps[6].Key, "", "ops@host"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		keys []string
		want string // in the error
	}{
		{[]string{snaps[0].Key, snaps[1].Key}, "a delta goes with its chain; name its full (" + snaps[0].Key + ")"},
		{[]string{snaps[0].Key, snaps[9].Key}, snapshot.ErrNewestChain.Error()},
		{[]string{snaps[0].Key, snaps[6].Key}, snapshot.ErrPinned.Error()},
		{[]string{"v2/Full-00000000-00000001-1"}, store.ErrNotFound.Error()},
	} {
		_, err := snapshot.DeleteChains(ctx, mem, snapshot.DeleteOptions{Keys: tc.keys})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("delete %v: %v, want %q", tc.keys, err, tc.want)
		}
	}
	if after, _ := snapshot.List(ctx, mem); len(after.Snapshots) != len(snaps) {
		t.Fatalf("refused deletes deleted %d objects", len(snaps)-len(after.Snapshots))
	}

	before := now.Add(time.Hour)
	dry, err := snapshot.DeleteChains(ctx, mem, snapshot.DeleteOptions{Before: before, DryRun: true})
	if err != nil || keys(dry.Deleted) != keys(snaps[:6]) || len(dry.Spared) != 2 || dry.Record != "" {
		t.Fatalf("dry run: deleted %s, spared %+v, record %q, %v", keys(dry.Deleted), dry.Spared, dry.Record, err)
	}
	locked := lockedStore{Store: mem, locked: map[string]bool{snaps[3].Key: true}}
	res, err := snapshot.DeleteChains(ctx, locked, snapshot.DeleteOptions{Before: before, By: "ops@host"})
	if err != nil {
		t.Fatal(err)
	}
	if keys(res.Deleted) != keys(snaps[:3]) || keys(res.Locked) != keys(snaps[3:4]) || keys(res.KeptForLock) != keys(snaps[4:6]) {
		t.Fatalf("deleted %s, locked %s, kept for the lock %s", keys(res.Deleted), keys(res.Locked), keys(res.KeptForLock))
	}
	recs, err := snapshot.ReadDeletions(ctx, mem)
	if err != nil || len(recs) != 1 || recs[0].By != "ops@host" || len(recs[0].Snapshots) != 6 {
		t.Fatalf("deletion records %+v, %v", recs, err)
	}
	gc, err := snapshot.GC(ctx, mem, snapshot.Retention{}, snapshot.GCOptions{DryRun: true, Now: func() time.Time { return now }})
	if err != nil || gc.Deletions != 0 {
		// A dry run reads no records; a GC that deletes does.
		t.Fatalf("dry GC: %+v, %v", gc.Deletions, err)
	}
	if gc, err = snapshot.GC(ctx, mem, snapshot.Retention{Policy: snapshot.Calendar, MaxAge: 1000 * time.Hour}, snapshot.GCOptions{Now: func() time.Time { return now }}); err != nil || gc.Deletions != 1 {
		t.Fatalf("GC counts %d deletion records, %v", gc.Deletions, err)
	}
}

// A full taken at the revision a delta ends (the delta written just
// before it) does not own that delta: deleting the full's chain leaves
// the chain before it whole, and so does retention.
func TestAFullDoesNotOwnTheDeltaItCovers(t *testing.T) {
	ctx := t.Context()
	st := store.NewMem()
	snaps := []snapshot.Snapshot{
		full(4, t0), delta(5, 6, t0.Add(time.Second)), full(6, t0.Add(2*time.Second)), delta(7, 8, t0.Add(3*time.Second)),
		full(8, t0.Add(4*time.Second)),
	}
	putAll(ctx, t, st, snaps)
	res, err := snapshot.DeleteChains(ctx, st, snapshot.DeleteOptions{Keys: []string{snaps[2].Key}})
	if err != nil || keys(res.Deleted) != keys(snaps[2:4]) {
		t.Fatalf("delete %s: deleted %s, %v", snaps[2].Key, keys(res.Deleted), err)
	}
	plan, err := snapshot.GC(ctx, st, snapshot.Retention{Policy: snapshot.Calendar, MaxAge: time.Hour}, snapshot.GCOptions{DryRun: true, Now: func() time.Time { return t0 }})
	if err != nil || len(plan.Deleted) != 0 {
		t.Fatalf("retention would delete %s, %v", keys(plan.Deleted), err)
	}
	for _, k := range plan.Kept {
		if k.Snapshot.Key == snaps[1].Key && k.Full != snaps[0].Key {
			t.Fatalf("%s kept in the chain of %s", k.Snapshot.Key, k.Full)
		}
	}
}
