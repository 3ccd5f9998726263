package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// StoreTimeout is the help of --store-timeout, which both binaries take.
const StoreTimeout = "bound on the store standing still: opening it, a call with no answer, or a transfer with no progress for this long fails (0: no bound)"

// OpenStore opens the store url names, bounded as --store-timeout says:
// the open (which asks the store, e.g. for its bucket) gives up after
// timeout, and every later call is store.Bounded. A mistake in the URL
// is a usage error. The store logs to log (its retries, a credential
// file it falls back from).
func OpenStore(ctx context.Context, url string, timeout time.Duration, log *slog.Logger) (store.Store, error) {
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
		st, err := store.OpenWith(ctx, url, store.Options{Logger: log})
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

// OpenSite is OpenStore for a site a program must not depend on to start
// (a second site, or a first one beside it): a mistake in the URL is a
// usage error now, and the store is opened at its first call, and again
// at the next call after an open that failed, so a site that does not
// answer fails the calls that need it, not the program.
func OpenSite(ctx context.Context, url string, timeout time.Duration, log *slog.Logger) (store.Store, error) {
	if err := store.CheckURL(url); err != nil {
		return nil, Usage(fmt.Errorf("--store: %w", err))
	}
	return &site{url: url, open: func() (store.Store, error) {
		return OpenStore(context.WithoutCancel(ctx), url, timeout, log)
	}}, nil
}

type site struct {
	url  string
	open func() (store.Store, error)

	mu sync.Mutex
	st store.Store
}

func (s *site) get() (store.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st == nil {
		st, err := s.open()
		if err != nil {
			return nil, err
		}
		s.st = st
	}
	return s.st, nil
}

// String is the URL, as the opened store would name itself.
func (s *site) String() string { return s.url }

func (s *site) Put(ctx context.Context, key string, r io.Reader) error {
	st, err := s.get()
	if err != nil {
		return err
	}
	return st.Put(ctx, key, r)
}

func (s *site) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	st, err := s.get()
	if err != nil {
		return nil, err
	}
	return st.Get(ctx, key)
}

func (s *site) List(ctx context.Context, prefix string) ([]store.Object, error) {
	st, err := s.get()
	if err != nil {
		return nil, err
	}
	return st.List(ctx, prefix)
}

func (s *site) Delete(ctx context.Context, key string) error {
	st, err := s.get()
	if err != nil {
		return err
	}
	return st.Delete(ctx, key)
}
