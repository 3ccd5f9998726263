package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// StoreTimeout is the help of --store-timeout, which both binaries take.
const StoreTimeout = "bound on the store standing still: opening it, a call with no answer, or a transfer with no progress for this long fails (0: no bound)"

// OpenStore opens the store url names, bounded as --store-timeout says:
// the open (which asks the store, e.g. for its bucket) gives up after
// timeout, and every later call is store.Bounded. A mistake in the URL
// is a usage error.
func OpenStore(ctx context.Context, url string, timeout time.Duration) (store.Store, error) {
	if err := (Durations{{"store-timeout", timeout, true}}).Check(); err != nil {
		return nil, err
	}
	type opened struct {
		st  store.Store
		err error
	}
	// Not a deadline on ctx: a backend may keep the context it was
	// opened with for its credentials.
	done := make(chan opened, 1)
	go func() {
		st, err := store.Open(ctx, url)
		done <- opened{st, err}
	}()
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case o := <-done:
		if errors.Is(o.err, store.ErrBadURL) {
			return nil, Usage(fmt.Errorf("--store: %w", o.err))
		}
		if o.err != nil {
			return nil, o.err
		}
		return store.Bounded(o.st, timeout), nil
	case <-expired:
		return nil, fmt.Errorf("store %s: open: %w: no answer within %s (--store-timeout)", url, store.ErrNoAnswer, timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
