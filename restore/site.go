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
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		return err
	}
	chain, err := cat.Latest()
	if err != nil {
		return err
	}
	if _, err := chain.Check(); err != nil {
		return fmt.Errorf("its newest chain is broken: %w", err)
	}
	return nil
}
