package snapshot_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// A second site takes copies of one first store only: an empty one is
// claimed, and copied to again; one that holds another store's full
// snapshot, or was claimed by another store, is refused, so that neither
// copies nor retention touch what is there.
func TestClaimMirror(t *testing.T) {
	ctx := context.Background()
	first, other, second := store.NewMem(), store.NewMem(), store.NewMem()
	put(t, first, full(10, t0), delta(11, 20, t0.Add(time.Minute)))
	if err := snapshot.ClaimMirror(ctx, first, second); err != nil {
		t.Fatalf("an empty second site: %v", err)
	}
	if _, err := snapshot.Copy(ctx, first, second, snapshot.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := snapshot.ClaimMirror(ctx, first, second); err != nil {
		t.Fatalf("the same first store again: %v", err)
	}
	put(t, other, full(30, t0.Add(time.Hour)))
	if err := snapshot.ClaimMirror(ctx, other, second); !errors.Is(err, snapshot.ErrOtherSite) {
		t.Fatalf("another store onto a claimed second site: %v, want ErrOtherSite", err)
	} else {
		t.Log(err)
	}
	// Never claimed, holding another store's backups (a copy of them, or
	// a prefix shared by mistake).
	unclaimed := store.NewMem()
	put(t, unclaimed, full(30, t0.Add(time.Hour)))
	if err := snapshot.ClaimMirror(ctx, first, unclaimed); !errors.Is(err, snapshot.ErrOtherSite) {
		t.Fatalf("a second site holding another store's full: %v, want ErrOtherSite", err)
	} else {
		t.Log(err)
	}
	if objs, err := unclaimed.List(ctx, ""); err != nil || len(objs) != 1 {
		t.Fatalf("the refused site was written to: %v %v", objs, err)
	}
}
