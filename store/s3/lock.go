package s3

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/etcdkit/etcdkit/store"
)

// LockedUntil is the end of the object's Object Lock retention, its own
// or the one the bucket's default gave it (store.LockTeller); zero on a
// bucket without Object Lock, asked nothing. AWS stamps each version with
// the default as it is written; a server that applies the default only
// when asked to delete (versitygw) stamps nothing, and the end is then
// the version's creation plus the bucket's default today.
func (s *Store) LockedUntil(ctx context.Context, key string) (time.Time, error) {
	if !s.objectLock {
		return time.Time{}, nil
	}
	name, err := s.loc.Object(key)
	if err != nil {
		return time.Time{}, err
	}
	in := s.head(name)
	if s.versions != nil {
		// The object is its first version; later ones are an attacker's.
		id, err := s.firstVersion(ctx, name)
		if err != nil {
			return time.Time{}, s.fail("head", key, err)
		}
		in.VersionId = aws.String(id)
	}
	out, err := s.client.HeadObject(ctx, in)
	if err != nil {
		return time.Time{}, s.fail("head", key, err)
	}
	if out.ObjectLockRetainUntilDate == nil && s.defaultRetention > 0 && out.LastModified != nil {
		return out.LastModified.Add(s.defaultRetention), nil
	}
	return aws.ToTime(out.ObjectLockRetainUntilDate), nil
}

var _ store.LockTeller = (*Store)(nil)
