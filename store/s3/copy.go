package s3

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/etcdkit/etcdkit/store"
)

// maxCopy is the largest object one CopyObject copies; larger ones go
// as a multipart upload of copied ranges.
const maxCopy = 5 << 30

// copyPartSize is the range each UploadPartCopy copies: 10,000 parts hold
// 5 TiB, and a database of 8 GiB is 16 parts.
const copyPartSize = 512 << 20

// CopyObject copies src to dst on the server (store.Copier), create-only:
// If-None-Match on the copy, or on the completion of the multipart copy
// of an object above 5 GiB. With SSE-C the source is read and the copy
// written with the same key; on a versioned bucket the source is its
// first version.
func (s *Store) CopyObject(ctx context.Context, src, dst string) error {
	sname, err := s.loc.Object(src)
	if err != nil {
		return err
	}
	dname, err := s.loc.Object(dst)
	if err != nil {
		return err
	}
	hin := s.head(sname)
	if s.versions != nil {
		id, err := s.firstVersion(ctx, sname)
		if err != nil {
			return s.fail("copy", src, err)
		}
		hin.VersionId = aws.String(id)
	}
	head, err := s.client.HeadObject(ctx, hin)
	if err != nil {
		return s.fail("copy", src, err)
	}
	// S3 takes If-None-Match on the copy; versitygw ignores it. Asked
	// first too, as Put asks a server without conditional writes: a race
	// with another writer of dst remains there.
	if _, err := s.client.HeadObject(ctx, s.head(dname)); err == nil {
		return s.fail("put", dst, store.ErrExists)
	} else if !errors.Is(s.classify(err), store.ErrNotFound) {
		return s.fail("put", dst, err)
	}
	source := s.cfg.Bucket + "/" + url.PathEscape(sname)
	if hin.VersionId != nil {
		source += "?versionId=" + url.QueryEscape(*hin.VersionId)
	}
	var (
		kms    s3types.ServerSideEncryption
		kmsKey *string
	)
	if s.cfg.KMSKeyID != "" {
		kms, kmsKey = s3types.ServerSideEncryptionAwsKms, aws.String(s.cfg.KMSKeyID)
	}
	size := aws.ToInt64(head.ContentLength)
	mode, until := s.lock()
	if size <= maxCopy {
		_, err := s.client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(dname),
			CopySource: aws.String(source), CopySourceIfMatch: head.ETag, IfNoneMatch: aws.String("*"),
			CopySourceSSECustomerAlgorithm: s.sse.algorithm, CopySourceSSECustomerKey: s.sse.key, CopySourceSSECustomerKeyMD5: s.sse.keyMD5,
			SSECustomerAlgorithm: s.sse.algorithm, SSECustomerKey: s.sse.key, SSECustomerKeyMD5: s.sse.keyMD5,
			ServerSideEncryption: kms, SSEKMSKeyId: kmsKey, ObjectLockMode: mode, ObjectLockRetainUntilDate: until})
		if err != nil {
			return s.fail("put", dst, err)
		}
		return nil
	}
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(dname),
		SSECustomerAlgorithm: s.sse.algorithm, SSECustomerKey: s.sse.key, SSECustomerKeyMD5: s.sse.keyMD5,
		ServerSideEncryption: kms, SSEKMSKeyId: kmsKey, ObjectLockMode: mode, ObjectLockRetainUntilDate: until})
	if err != nil {
		return s.fail("put", dst, err)
	}
	if err := s.copyParts(ctx, dname, source, head.ETag, up.UploadId, size); err != nil {
		s.abortAgain(dname, aws.ToString(up.UploadId))
		return s.fail("put", dst, err)
	}
	return nil
}

// copyParts copies the source's ranges as the parts of upload id and
// completes it, create-only.
func (s *Store) copyParts(ctx context.Context, dname, source string, etag, id *string, size int64) error {
	var parts []s3types.CompletedPart
	for n, off := int32(1), int64(0); off < size; n, off = n+1, off+copyPartSize {
		end := min(off+copyPartSize, size) - 1
		out, err := s.client.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(dname),
			UploadId: id, PartNumber: aws.Int32(n), CopySource: aws.String(source), CopySourceIfMatch: etag,
			CopySourceRange:                aws.String(fmt.Sprintf("bytes=%d-%d", off, end)),
			CopySourceSSECustomerAlgorithm: s.sse.algorithm, CopySourceSSECustomerKey: s.sse.key, CopySourceSSECustomerKeyMD5: s.sse.keyMD5,
			SSECustomerAlgorithm: s.sse.algorithm, SSECustomerKey: s.sse.key, SSECustomerKeyMD5: s.sse.keyMD5})
		if err != nil {
			return err
		}
		if out.CopyPartResult == nil {
			return errors.New("UploadPartCopy answered no part")
		}
		parts = append(parts, s3types.CompletedPart{ETag: out.CopyPartResult.ETag, PartNumber: aws.Int32(n)})
	}
	_, err := s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(dname),
		UploadId: id, IfNoneMatch: aws.String("*"), MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts},
		SSECustomerAlgorithm: s.sse.algorithm, SSECustomerKey: s.sse.key, SSECustomerKeyMD5: s.sse.keyMD5})
	return err
}

var _ store.Copier = (*Store)(nil)

// lock is the retention a new object gets: none without Lock.
func (s *Store) lock() (s3types.ObjectLockMode, *time.Time) {
	if s.cfg.Lock.For <= 0 {
		return "", nil
	}
	mode := s3types.ObjectLockModeGovernance
	if s.cfg.Lock.Compliance {
		mode = s3types.ObjectLockModeCompliance
	}
	return mode, aws.Time(s.cfg.Lock.Until(time.Now()))
}
