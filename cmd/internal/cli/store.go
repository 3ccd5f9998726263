package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/spf13/pflag"

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

// LockFlags are --lock-for and --lock-mode: the per-object lock of every
// object a command writes, as the store URL's ?lock-for=&lock-mode= say
// it (S3 Object Lock retention, GCS object retention, Azure version-level
// immutability).
type LockFlags struct {
	For  time.Duration
	Mode string
}

// Flags adds the flags to fs.
func (l *LockFlags) Flags(fs *pflag.FlagSet) {
	fs.DurationVar(&l.For, "lock-for", 0, "lock each object written to --store this long from its upload, where the bucket allows per-object locks (S3 Object Lock, GCS object retention, Azure version-level immutability); 0: the bucket's own policy alone")
	fs.StringVar(&l.Mode, "lock-mode", "", "the lock of --lock-for: governance (the default: a user with the provider's bypass right may lift it) or compliance (no one may)")
}

// URL adds the lock to a store URL; one that names a lock of its own
// already keeps it only when the flags say nothing.
func (l LockFlags) URL(raw string) (string, error) {
	if l.For == 0 && l.Mode == "" {
		return raw, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", Usage(fmt.Errorf("--store: %w", err))
	}
	switch u.Scheme {
	case "s3", "gs", "azblob":
	default:
		return "", Usage(fmt.Errorf("--lock-for: a %s:// store has no per-object locks (S3, GCS and Azure have)", u.Scheme))
	}
	q := u.Query()
	if q.Has("lock-for") || q.Has("lock-mode") {
		return "", Usage(errors.New("--lock-for and --lock-mode: the store URL names a lock already (?lock-for=, ?lock-mode=); say it once"))
	}
	if l.For < 0 {
		return "", Usage(fmt.Errorf("--lock-for %s: a duration above 0, such as 72h", l.For))
	}
	if l.For == 0 {
		return "", Usage(errors.New("--lock-mode needs --lock-for: how long each object is locked"))
	}
	q.Set("lock-for", l.For.String())
	if l.Mode != "" {
		q.Set("lock-mode", l.Mode)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}
