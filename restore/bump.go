package restore

import (
	"context"
	"fmt"
	"math"
	"time"

	snap "github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// MinSafeBump is the least SafeBump raises a revision by: writes made just
// before the loss that no delta caught, on a cluster too quiet to measure
// a rate.
const MinSafeBump = 1000

// Bump is a revision bump and how it was estimated.
type Bump struct {
	// Revisions the restored revision is raised by.
	Revisions uint64
	// Newest is the newest revision the store holds.
	Newest int64
	// Rate is the peak rate of revisions per second between two
	// consecutive snapshots of the latest chain.
	Rate float64
	// Since is the time from the newest snapshot to the restore.
	Since time.Duration
}

// SafeBump estimates how many revisions a cluster may have made that the
// store does not hold, for a restore of the state at revision restored: the
// revisions from restored to the store's newest (of every timeline), and the latest chain's
// peak rate over the time since its newest snapshot, twice, and at least
// MinSafeBump. A restored cluster bumped by it and marked compacted never
// serves a revision that a client of the lost cluster saw, and those
// clients' watches end in a compaction error that makes them list again.
func SafeBump(ctx context.Context, st store.Store, restored int64, now time.Time) (Bump, error) {
	cat, err := snap.List(ctx, st)
	if err != nil {
		return Bump{}, err
	}
	latest, err := cat.Latest()
	if err != nil {
		return Bump{}, fmt.Errorf("restore from %v: %w", st, err)
	}
	return safeBump(latest, cat.NewestRevision(), restored, now), nil
}

// safeBump is SafeBump's estimate from the latest chain, with newest the
// store's newest revision when other timelines reach further.
func safeBump(latest snap.Chain, storeNewest, restored int64, now time.Time) Bump {
	snaps := latest.Snapshots()
	b := Bump{Newest: max(latest.LastRevision(), storeNewest)}
	newest := snaps[0]
	for i := 1; i < len(snaps); i++ {
		prev, s := snaps[i-1], snaps[i]
		// Names have one-second precision: a second at least, so two
		// deltas written within one do not make the rate infinite.
		dt := max(s.Created.Sub(prev.Created).Seconds(), 1)
		if revs := float64(s.LastRevision - prev.LastRevision); revs > 0 {
			b.Rate = max(b.Rate, revs/dt)
		}
		if s.Created.After(newest.Created) {
			newest = s
		}
	}
	b.Since = max(now.Sub(newest.Created), 0)
	unseen := 2 * b.Rate * b.Since.Seconds()
	// Far past any revision a cluster reaches, and far from overflowing
	// etcd's int64 revisions.
	unseen = min(unseen, 1<<50)
	b.Revisions = uint64(max(b.Newest-restored, 0)) + max(uint64(math.Ceil(unseen)), MinSafeBump)
	return b
}
