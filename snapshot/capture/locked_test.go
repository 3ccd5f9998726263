package capture_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/snapshot/capture"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/s3"
)

// lockedBucket is an S3 bucket with Object Lock and a default compliance
// retention of a day: every object is locked as it is written.
func lockedBucket(t *testing.T) store.Store {
	t.Helper()
	ctx := context.Background()
	srv := emulator.Shared(t, emulator.S3)
	cli := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, "")})
	bucket := emulator.Bucket(t)
	if _, err := cli.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(bucket), ObjectLockEnabledForBucket: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.PutObjectLockConfiguration(ctx, &awss3.PutObjectLockConfigurationInput{Bucket: aws.String(bucket),
		ObjectLockConfiguration: &s3types.ObjectLockConfiguration{ObjectLockEnabled: s3types.ObjectLockEnabledEnabled,
			Rule: &s3types.ObjectLockRule{DefaultRetention: &s3types.DefaultRetention{Mode: s3types.ObjectLockRetentionModeCompliance, Days: aws.Int32(1)}}}}); err != nil {
		t.Fatal(err)
	}
	return opened(t)(store.Opened(s3.New(ctx, s3.Config{Bucket: bucket, Prefix: "etcd/main", Endpoint: srv.Endpoint, PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey})))
}

// Backups on a write-once bucket, with a retention that expires all but
// the newest full: every snapshot is written, no attempt fails, retention
// reports the expired snapshots locked and keeps them, and every chain
// restores.
func TestSnapshotterOnALockedBucket(t *testing.T) {
	ctx := ctxT(t)
	st := lockedBucket(t)
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	r := start(t, cli, st, capture.Options{DeltaPeriod: 100 * time.Millisecond, RetentionPeriod: 100 * time.Millisecond,
		Retention: snapshot.Retention{Policy: snapshot.LimitBased, MaxFulls: 1}})
	first := r.await(t, capture.OpFull).Snapshot
	var ends []int64
	for i := range 3 {
		res, err := (etcdtest.Workload{Ops: 60, Seed: 70 + uint64(i)}).Run(ctx, cli)
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, res.LastRevision)
		for r.Status().LastRevision < res.LastRevision {
			r.await(t, capture.OpDelta)
		}
		if i < 2 {
			if _, err := r.TakeFull(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The first two fulls are expired; the lock keeps them.
	for {
		gc := r.await(t, capture.OpGC)
		if slices.ContainsFunc(gc.Locked, func(s snapshot.Snapshot) bool { return s.Key == first.Key }) && len(gc.Locked) >= 2 {
			break
		}
	}
	r.stop(t)
	for _, res := range r.all {
		if res.Err != nil {
			t.Fatalf("%s (%s) failed on a write-once bucket: %v", res.Op, res.Reason, res.Err)
		}
	}
	// Each chain restores to the end of the writes before its next full.
	for _, end := range ends {
		got, err := restore.Restore(ctx, st, restore.Options{DataDir: filepath.Join(t.TempDir(), "data"), Source: restore.Source{Target: restore.Target{Revision: end}}})
		if err != nil || got.Revision != end {
			t.Fatalf("restore to %d: %+v, %v", end, got.Revision, err)
		}
	}
}
