package store

import (
	"context"
	"fmt"
)

// Copier is a store that copies an object on its server, no byte passing
// through the caller (S3 CopyObject, GCS rewrite, Azure copy from URL).
// CopyObject is create-only as Put is: ErrExists when dst holds an
// object, and a failed copy leaves nothing listable at dst.
type Copier interface {
	CopyObject(ctx context.Context, src, dst string) error
}

// CopyObject copies the object src to dst inside st: on the server when
// st, or a store a view of it is made over, is a Copier, else read with
// Get and written with Put. It says which way it went.
func CopyObject(ctx context.Context, st Store, src, dst string) (onServer bool, err error) {
	if err := CheckKey(src); err != nil {
		return false, err
	}
	if err := CheckKey(dst); err != nil {
		return false, err
	}
	if c, prefix, ok := as[Copier](st); ok {
		return true, c.CopyObject(ctx, JoinKey(prefix, src), JoinKey(prefix, dst))
	}
	rc, err := st.Get(ctx, src)
	if err != nil {
		return false, err
	}
	defer func() { _ = rc.Close() }()
	if err := st.Put(ctx, dst, rc); err != nil {
		return false, fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return false, nil
}
