package clouds_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// now is the moment the chains end; retention's clock.
var now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// chains writes four chains to st, a day apart, each a full (with the
// identity record its writer leaves) and two deltas, the last at now.
func chains(t *testing.T, ctx context.Context, st store.Store) []snapshot.Snapshot {
	t.Helper()
	var snaps []snapshot.Snapshot
	for i := range 4 {
		at, rev := now.Add(time.Duration(i-3)*24*time.Hour), int64(100*i+10)
		for _, key := range []string{
			fmt.Sprintf("v2/Full-00000000-%08d-%d", rev, at.Unix()),
			fmt.Sprintf("v2/Incr-%08d-%08d-%d", rev+1, rev+10, at.Add(time.Minute).Unix()),
			fmt.Sprintf("v2/Incr-%08d-%08d-%d", rev+11, rev+20, at.Add(2*time.Minute).Unix()),
		} {
			s, err := snapshot.Parse(key)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Put(ctx, key, strings.NewReader("placeholder "+key)); err != nil {
				t.Fatal(err)
			}
			if s.Kind == snapshot.KindFull {
				if err := snapshot.WriteIdentity(ctx, st, s, snapshot.Identity{ClusterID: "1"}); err != nil {
					t.Fatal(err)
				}
			}
			snaps = append(snaps, s)
		}
	}
	return snaps
}

func keys(snaps []snapshot.Snapshot) []string {
	out := make([]string, 0, len(snaps))
	for _, s := range snaps {
		out = append(out, s.Key)
	}
	return out
}

// held are the snapshot keys st lists.
func held(t *testing.T, ctx context.Context, st store.Store) []string {
	t.Helper()
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	return keys(cat.All())
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Retention, pins and deletes on every store: a pinned chain through the
// Calendar policy, deletes by hand and their refusals, and a second
// site's own retention with the first site's pins.
func TestKeepingOnEveryStore(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store.Store) { keeping(t, st) })
}

// keeping checks retention, pins and deletes under prefixes of st.
func keeping(t *testing.T, st store.Store) {
	open := func(t *testing.T, prefix string) store.Store {
		p, err := store.WithPrefix(st, prefix)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("PinnedThroughCalendar", func(t *testing.T) {
		ctx := ctxFor(t)
		st := open(t, "keep-pin")
		snaps := chains(t, ctx, st)
		pin(t, ctx, st, snaps[4].Key, snaps[3].Key)
		r := snapshot.Retention{Policy: snapshot.Calendar, Hourly: 1}
		res, err := snapshot.GC(ctx, st, r, snapshot.GCOptions{Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		want := append(keys(snaps[3:6]), keys(snaps[9:])...)
		if got := held(t, ctx, st); !slices.Equal(got, want) {
			t.Fatalf("after GC %v the store holds %v, want the pinned chain and the newest: %v", keys(res.Deleted), got, want)
		}
	})
	t.Run("DeleteByHand", func(t *testing.T) {
		ctx := ctxFor(t)
		st := open(t, "keep-delete")
		snaps := chains(t, ctx, st)
		pin(t, ctx, st, snaps[6].Key, snaps[6].Key)
		for _, named := range []string{snaps[9].Key, snaps[6].Key, snaps[1].Key} {
			if _, err := snapshot.DeleteChains(ctx, st, snapshot.DeleteOptions{Keys: []string{snaps[0].Key, named}}); err == nil {
				t.Fatalf("delete of %s was taken", named)
			}
		}
		if got := held(t, ctx, st); len(got) != len(snaps) {
			t.Fatalf("refused deletes left %d of %d", len(got), len(snaps))
		}
		res, err := snapshot.DeleteChains(ctx, st, snapshot.DeleteOptions{Before: now.Add(time.Hour), By: "keeptest"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(keys(res.Deleted), keys(snaps[:6])) || len(res.Spared) != 2 {
			t.Fatalf("deleted %v, spared %+v", keys(res.Deleted), res.Spared)
		}
		if got, want := held(t, ctx, st), keys(snaps[6:]); !slices.Equal(got, want) {
			t.Fatalf("the store holds %v, want %v", got, want)
		}
		recs, err := snapshot.ReadDeletions(ctx, st)
		if err != nil || len(recs) != 1 || len(recs[0].Snapshots) != 6 {
			t.Fatalf("deletion records %+v, %v", recs, err)
		}
	})
	t.Run("SecondSiteRetention", func(t *testing.T) {
		ctx := ctxFor(t)
		first, second := open(t, "keep-first"), open(t, "keep-second")
		snaps := chains(t, ctx, first)
		pin(t, ctx, first, snaps[0].Key, snaps[0].Key)
		// As a sidecar's second site: claimed, copied, then its own
		// retention (the newest full) with the first site's pins.
		if err := snapshot.ClaimMirror(ctx, first, second); err != nil {
			t.Fatal(err)
		}
		if _, err := snapshot.Copy(ctx, first, second, snapshot.CopyOptions{}); err != nil {
			t.Fatal(err)
		}
		pins, err := snapshot.ReadPins(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		clock := func() time.Time { return now.Add(time.Hour) }
		if _, err := snapshot.GC(ctx, second, snapshot.Retention{Policy: snapshot.LimitBased, MaxFulls: 1, DeltaRetention: time.Second},
			snapshot.GCOptions{Now: clock, Pins: pins}); err != nil {
			t.Fatal(err)
		}
		// The first site's own, longer retention keeps everything.
		if _, err := snapshot.GC(ctx, first, snapshot.Retention{Policy: snapshot.LimitBased, MaxFulls: 7}, snapshot.GCOptions{Now: clock}); err != nil {
			t.Fatal(err)
		}
		if got := held(t, ctx, first); len(got) != len(snaps) {
			t.Fatalf("the first site holds %d of %d", len(got), len(snaps))
		}
		if got, want := held(t, ctx, second), append(keys(snaps[:3]), keys(snaps[9:])...); !slices.Equal(got, want) {
			t.Fatalf("the second site holds %v, want the first site's pinned chain and the newest: %v", got, want)
		}
	})
}

// On a bucket that locks every object it holds (S3 Object Lock; GCS's
// and Azure's emulators keep no lock), GC and deletes keep locked chains
// whole and say so, and a pin is locked with them.
func TestKeepingOnALockedBucket(t *testing.T) {
	st := lockedBucket(t)
	ctx := ctxFor(t)
	snaps := chains(t, ctx, st)
	pin(t, ctx, st, snaps[3].Key, snaps[3].Key)
	res, err := snapshot.GC(ctx, st, snapshot.Retention{Policy: snapshot.LimitBased, MaxFulls: 1, DeltaRetention: time.Second},
		snapshot.GCOptions{Now: func() time.Time { return now.Add(time.Hour) }})
	if err != nil {
		t.Fatalf("GC on a locked bucket: %v", err)
	}
	if len(res.Deleted) != 0 || len(res.Locked) == 0 {
		t.Fatalf("GC on a locked bucket deleted %v, locked %v", keys(res.Deleted), keys(res.Locked))
	}
	del, err := snapshot.DeleteChains(ctx, st, snapshot.DeleteOptions{Keys: []string{snaps[0].Key}})
	if err != nil {
		t.Fatalf("delete on a locked bucket: %v", err)
	}
	if len(del.Deleted) != 0 || !slices.Equal(keys(del.Locked), keys(snaps[:1])) || !slices.Equal(keys(del.KeptForLock), keys(snaps[1:3])) {
		t.Fatalf("delete on a locked bucket: deleted %v, locked %v, kept for the lock %v", keys(del.Deleted), keys(del.Locked), keys(del.KeptForLock))
	}
	if got := held(t, ctx, st); len(got) != len(snaps) {
		t.Fatalf("the locked bucket holds %d of %d", len(got), len(snaps))
	}
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Unpin(ctx, st, cat, snaps[3].Key); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("unpin on a locked bucket: %v, want ErrLocked", err)
	}
}

// pin pins the chain of key and checks it names full.
func pin(t *testing.T, ctx context.Context, st store.Store, key, full string) {
	t.Helper()
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	p, err := snapshot.PinChain(ctx, st, cat, key, "keeptest", "keeptest")
	if err != nil || p.Snapshot != full {
		t.Fatalf("pin %s: %+v, %v", key, p, err)
	}
}
