package restore

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// Site is the store a read of the backups uses, of the first site st and
// src.Secondary, a second that holds copies of its snapshots: the first,
// unless it cannot be listed, holds no backups, or its newest chain is
// broken, while the second's newest chain is whole. It logs which site
// answered and why; when neither has a whole chain the first is returned,
// so that its error is the one the read reports. Without a second site it
// is st. Restore, Follow and Replay call it; a caller that lists the
// catalog itself (a start-up's check) calls it first.
func Site(ctx context.Context, st store.Store, src ReadOptions) store.Store {
	first, second, log := st, src.Secondary, src.Logger
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
