package restore

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// PickSite picks the store a read of the backups uses, of a first site and
// a second that holds copies of its snapshots: the first, unless it cannot
// be listed, holds no backups, or its newest chain is broken, while the
// second's newest chain is whole. It logs which site answered and why;
// when neither has a whole chain the first is returned, so that its error
// is the one the read reports. A nil second returns the first.
func PickSite(ctx context.Context, first, second store.Store, log *slog.Logger) store.Store {
	if second == nil {
		return first
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	whyFirst := wholeChain(ctx, first)
	if whyFirst == nil {
		log.Info("restore: the first site answers", "store", fmt.Sprint(first))
		return first
	}
	if whySecond := wholeChain(ctx, second); whySecond != nil {
		log.Warn("restore: neither site holds a whole chain; reading the first", "store", fmt.Sprint(first),
			"first", whyFirst, "second", whySecond)
		return first
	}
	log.Warn("restore: the second site answers: the first has no whole chain", "store", fmt.Sprint(second), "first", fmt.Sprint(first), "why", whyFirst)
	return second
}

// wholeChain says why st's newest chain cannot be read whole, nil when it
// can (by its objects' names: a gap, a missing full, an unreachable store).
func wholeChain(ctx context.Context, st store.Store) error {
	_, latest, err := listLatest(ctx, st)
	if err != nil {
		return err
	}
	return broken(latest)
}

// listLatest lists st and picks its newest chain.
func listLatest(ctx context.Context, st store.Store) (snapshot.Catalog, snapshot.Chain, error) {
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		return cat, snapshot.Chain{}, err
	}
	latest, err := cat.Latest()
	return cat, latest, err
}

// broken says why chain cannot be read whole by its objects' names.
func broken(chain snapshot.Chain) error {
	if _, err := chain.Check(); err != nil {
		return fmt.Errorf("its newest chain is broken: %w", err)
	}
	return nil
}

// RestoreSites is Restore from site, the one of first and second that
// PickSite picked, and then, when a backup read there is damaged (bytes
// that names cannot show wrong: a checksum, a trailer, a database that
// does not hold), from the other site's copies: that is what a second
// site is for. The other site's chain is found again (opts.Chain belongs
// to site). A failed restore leaves the data dir as it was, so the second
// try starts from the same place. A nil second is Restore.
func RestoreSites(ctx context.Context, site, first, second store.Store, opts Options) (Result, error) {
	res, err := Restore(ctx, site, opts)
	other := first
	if site == first {
		other = second
	}
	if err == nil || other == nil || other == site || !Damaged(err) {
		return res, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log.Warn("restore: a backup on the site read is damaged; restoring from the other site's copies",
		"damaged", fmt.Sprint(site), "other", fmt.Sprint(other), "err", err)
	opts.Chain = nil
	res2, err2 := Restore(ctx, other, opts)
	if err2 != nil {
		return res, fmt.Errorf("%w; from the other site %v: %w", err, other, err2)
	}
	return res2, nil
}
