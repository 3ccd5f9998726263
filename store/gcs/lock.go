package gcs

import (
	"context"
	"time"

	"cloud.google.com/go/storage"

	"github.com/etcdkit/etcdkit/store"
)

// retention is the object retention a new object gets: none without Lock.
func (s *Store) retention() *storage.ObjectRetention {
	if s.cfg.Lock.For <= 0 {
		return nil
	}
	mode := "Unlocked"
	if s.cfg.Lock.Compliance {
		mode = "Locked"
	}
	return &storage.ObjectRetention{Mode: mode, RetainUntil: s.cfg.Lock.Until(time.Now())}
}

// LockedUntil is the later end of the object's own retention and of the
// one the bucket's retention policy gives it (store.LockTeller); zero on
// a bucket with neither, asked nothing.
func (s *Store) LockedUntil(ctx context.Context, key string) (time.Time, error) {
	if !s.lockable {
		return time.Time{}, nil
	}
	obj, err := s.object(key)
	if err != nil {
		return time.Time{}, err
	}
	a, err := obj.Attrs(ctx)
	if err != nil {
		return time.Time{}, s.fail("head", key, err)
	}
	until := a.RetentionExpirationTime
	if a.Retention != nil && a.Retention.RetainUntil.After(until) {
		until = a.Retention.RetainUntil
	}
	return until, nil
}

var _ store.LockTeller = (*Store)(nil)
