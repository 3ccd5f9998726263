package s3

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/etcdkit/etcdkit/store"
)

// ExcludeTag is store.ExcludeTag: on a versioned bucket, a name under a
// delete marker whose first version carries it is not listed.
const ExcludeTag = store.ExcludeTag

// versions is how the store reads a bucket that keeps versions (Object
// Lock turns versioning on). An object is its first version: what the
// backups wrote, whatever was put or deleted over it later. A delete
// marker alone hides nothing (with a write-once lock, anyone with the
// cluster's credentials can place one), as etcd-backup-restore reads such
// buckets; a marker over a first version tagged ExcludeTag hides it.
type versions struct {
	mu sync.Mutex
	// first is the first version of each object name a listing saw.
	first map[string]string
}

// inspectBucket asks whether the bucket keeps versions and has Object
// Lock. A server or a policy that does not answer leaves the store reading
// objects as they are listed, and says so once.
func (s *Store) inspectBucket(ctx context.Context) {
	out, err := s.client.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(s.cfg.Bucket)})
	if err != nil {
		s.cfg.Options.Logger.Warn("the bucket's versioning cannot be asked (GetBucketVersioning); objects are read as listed, so a delete marker hides a snapshot",
			"store", s.loc, "err", err)
		return
	}
	if out.Status != s3types.BucketVersioningStatusEnabled && out.Status != s3types.BucketVersioningStatusSuspended {
		// Object Lock needs versions.
		return
	}
	s.versions = &versions{first: map[string]string{}}
	// S3 takes an upload to a bucket with Object Lock only with a checksum
	// of its body (Content-MD5 or x-amz-checksum-*), which the client
	// otherwise sends only where every operation needs one.
	if lock, err := s.client.GetObjectLockConfiguration(ctx, &s3.GetObjectLockConfigurationInput{Bucket: aws.String(s.cfg.Bucket)}); err == nil &&
		lock.ObjectLockConfiguration != nil && lock.ObjectLockConfiguration.ObjectLockEnabled == s3types.ObjectLockEnabledEnabled {
		s.objectLock = true
		if r := lock.ObjectLockConfiguration.Rule; r != nil && r.DefaultRetention != nil {
			d := r.DefaultRetention
			s.defaultRetention = time.Duration(aws.ToInt32(d.Days))*24*time.Hour + time.Duration(aws.ToInt32(d.Years))*365*24*time.Hour
		}
		s.client = s3.New(s.client.Options(), func(o *s3.Options) { o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenSupported })
		s.tm = s.transferManager(aws.RequestChecksumCalculationWhenSupported)
	}
}

// listVersions lists the first versions under the bucket prefix full, and
// the names that have a delete marker; names holds every name in order.
func (s *Store) listVersions(ctx context.Context, full string) (first map[string]s3types.ObjectVersion, marked map[string]bool, names []string, err error) {
	first, marked = map[string]s3types.ObjectVersion{}, map[string]bool{}
	pages := s3.NewListObjectVersionsPaginator(s.client, &s3.ListObjectVersionsInput{Bucket: aws.String(s.cfg.Bucket), Prefix: aws.String(full)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		// A name's versions come newest first: the last one seen is the
		// first written.
		for _, v := range page.Versions {
			name := aws.ToString(v.Key)
			if _, ok := first[name]; !ok {
				names = append(names, name)
			}
			first[name] = v
		}
		for _, m := range page.DeleteMarkers {
			marked[aws.ToString(m.Key)] = true
		}
	}
	slices.Sort(names)
	return first, marked, names, nil
}

// listFirst is List on a versioned bucket, and the names it leaves out
// as an operator excluded them.
func (s *Store) listFirst(ctx context.Context, prefix, full string) (objs, excluded []store.Object, err error) {
	first, marked, names, err := s.listVersions(ctx, full)
	if err != nil {
		return nil, nil, s.fail("list", prefix, err)
	}
	for _, name := range names {
		v := first[name]
		o := store.Object{Key: s.loc.Key(name), Size: aws.ToInt64(v.Size), Modified: aws.ToTime(v.LastModified)}
		if marked[name] {
			out, err := s.excluded(ctx, name, aws.ToString(v.VersionId))
			if err != nil {
				return nil, nil, s.fail("list", prefix, err)
			}
			if out {
				excluded = append(excluded, o)
				continue
			}
		}
		s.versions.mu.Lock()
		s.versions.first[name] = aws.ToString(v.VersionId)
		s.versions.mu.Unlock()
		objs = append(objs, o)
	}
	return objs, excluded, nil
}

// ListExcluded lists the first versions under delete markers tagged
// ExcludeTag (store.ExcludedLister); none on a bucket without versions.
func (s *Store) ListExcluded(ctx context.Context, prefix string) ([]store.Object, error) {
	full, err := s.loc.ListPrefix(prefix)
	if err != nil || s.versions == nil {
		return nil, err
	}
	_, excluded, err := s.listFirst(ctx, prefix, full)
	return excluded, err
}

var _ store.ExcludedLister = (*Store)(nil)

// excluded says whether version id of name carries ExcludeTag=true.
func (s *Store) excluded(ctx context.Context, name, id string) (bool, error) {
	out, err := s.client.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(name), VersionId: aws.String(id)})
	if err != nil {
		return false, err
	}
	for _, t := range out.TagSet {
		if aws.ToString(t.Key) == ExcludeTag && aws.ToString(t.Value) == "true" {
			return true, nil
		}
	}
	return false, nil
}

// firstVersion is the first version of name: the one the last listing
// saw, or the bucket's answer.
func (s *Store) firstVersion(ctx context.Context, name string) (string, error) {
	s.versions.mu.Lock()
	id, ok := s.versions.first[name]
	s.versions.mu.Unlock()
	if ok {
		return id, nil
	}
	first, _, _, err := s.listVersions(ctx, name)
	if err != nil {
		return "", err
	}
	v, ok := first[name]
	if !ok {
		return "", store.ErrNotFound
	}
	return aws.ToString(v.VersionId), nil
}

// deleteVersions deletes every version and delete marker of name. A lock
// that refuses one is ErrLocked once the others were tried.
func (s *Store) deleteVersions(ctx context.Context, key, name string) error {
	pages := s3.NewListObjectVersionsPaginator(s.client, &s3.ListObjectVersionsInput{Bucket: aws.String(s.cfg.Bucket), Prefix: aws.String(name)})
	var ids []string
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return s.fail("delete", key, err)
		}
		for _, v := range page.Versions {
			if aws.ToString(v.Key) == name {
				ids = append(ids, aws.ToString(v.VersionId))
			}
		}
		for _, m := range page.DeleteMarkers {
			if aws.ToString(m.Key) == name {
				ids = append(ids, aws.ToString(m.VersionId))
			}
		}
	}
	var locked error
	for _, id := range ids {
		_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(name), VersionId: aws.String(id)})
		if err == nil || errors.Is(s.classify(err), store.ErrNotFound) {
			continue
		}
		err = s.fail("delete", key, err)
		if !errors.Is(err, store.ErrLocked) {
			return err
		}
		locked = cmp.Or(locked, err)
	}
	if locked == nil {
		s.versions.forget(name)
	}
	return locked
}

// forget drops what a listing saw of name, and says whether it had.
func (v *versions) forget(name string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.first[name]
	delete(v.first, name)
	return ok
}
