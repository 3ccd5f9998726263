package gcs

import (
	"context"
	"errors"

	"cloud.google.com/go/storage"

	"github.com/etcdkit/etcdkit/store"
)

// CopyObject copies src to dst on the server (store.Copier) through GCS's
// rewrite, which the client repeats until the server says it is done:
// create-only (generation 0 at dst), of the source's generation found
// first.
func (s *Store) CopyObject(ctx context.Context, src, dst string) error {
	from, err := s.object(src)
	if err != nil {
		return err
	}
	to, err := s.object(dst)
	if err != nil {
		return err
	}
	attrs, err := from.Attrs(ctx)
	if err != nil {
		return s.fail("copy", src, err)
	}
	// GCS applies generation 0 at dst to the rewrite; fake-gcs-server
	// ignores it. Asked first too: a race with another writer of dst
	// remains there.
	if _, err := to.Attrs(ctx); err == nil {
		return s.fail("put", dst, store.ErrExists)
	} else if !errors.Is(err, storage.ErrObjectNotExist) {
		return s.fail("put", dst, err)
	}
	c := to.If(storage.Conditions{DoesNotExist: true}).CopierFrom(from.Generation(attrs.Generation))
	// A rewrite gives the copy attributes of its own, not the source's
	// lock: the copy's starts now.
	c.Retention = s.retention()
	if _, err := c.Run(ctx); err != nil {
		return s.fail("put", dst, err)
	}
	return nil
}

var _ store.Copier = (*Store)(nil)
