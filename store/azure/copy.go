package azure

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"

	"github.com/etcdkit/etcdkit/store"
)

// CopyObject copies src to dst on the server (store.Copier) with Copy
// Blob, create-only (If-None-Match: * at dst) and of the source's ETag
// found first. Within one account the copy is done when the call returns
// as a rule; a copy still pending is followed until it ends, and one that
// fails leaves its destination deleted.
func (s *Store) CopyObject(ctx context.Context, src, dst string) error {
	sname, err := s.loc.Object(src)
	if err != nil {
		return err
	}
	dname, err := s.loc.Object(dst)
	if err != nil {
		return err
	}
	from := s.container.NewBlobClient(sname)
	props, err := from.GetProperties(ctx, nil)
	if err != nil {
		return s.fail("copy", src, err)
	}
	to := s.container.NewBlobClient(dname)
	mode, until := s.lock()
	resp, err := to.StartCopyFromURL(ctx, from.URL(), &blob.StartCopyFromURLOptions{AccessConditions: createOnly,
		ImmutabilityPolicyMode: mode, ImmutabilityPolicyExpiry: until,
		SourceModifiedAccessConditions: &blob.SourceModifiedAccessConditions{SourceIfMatch: props.ETag}})
	if err != nil {
		return s.fail("put", dst, err)
	}
	status, wait := resp.CopyStatus, 100*time.Millisecond
	for status != nil && *status == blob.CopyStatusTypePending {
		select {
		case <-ctx.Done():
			s.dropCopy(ctx, to, resp.CopyID)
			return s.fail("put", dst, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
		p, err := to.GetProperties(ctx, nil)
		if err != nil {
			s.dropCopy(ctx, to, resp.CopyID)
			return s.fail("put", dst, err)
		}
		status = p.CopyStatus
	}
	if status != nil && *status != blob.CopyStatusTypeSuccess {
		s.dropCopy(ctx, to, resp.CopyID)
		return s.fail("put", dst, fmt.Errorf("the copy ended %s", *status))
	}
	return nil
}

// dropCopy aborts a copy that did not finish and deletes what it left,
// with a deadline of its own: ctx may be the one that ended.
func (s *Store) dropCopy(ctx context.Context, to *blob.Client, id *string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if id != nil {
		_, _ = to.AbortCopyFromURL(ctx, *id, nil)
	}
	_, _ = to.Delete(ctx, nil)
}

var _ store.Copier = (*Store)(nil)
