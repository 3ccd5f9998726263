package clouds_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/internal/emulator/s3lock"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/s3"
)

// lockedBucket is an S3 bucket with Object Lock and a default compliance
// retention of a day: every object is locked as it is written.
func lockedBucket(t *testing.T) store.Store {
	t.Helper()
	return objectLockBucket(t, 1, 0)
}

// objectLockBucket is an S3 bucket with Object Lock, every object locked
// defaultDays by the bucket's default retention when above 0, and each
// object locked lockFor by the store when set.
func objectLockBucket(t *testing.T, defaultDays int32, lockFor time.Duration) store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv := emulator.Shared(t, emulator.S3)
	bucket := emulator.Bucket(t)
	if err := s3lock.CreateBucket(ctx, srv, bucket, defaultDays); err != nil {
		t.Fatal(err)
	}
	return opened(t)(store.Opened(s3.New(ctx, s3.Config{Bucket: bucket, Prefix: "etcd/main", Endpoint: srv.Endpoint, PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, Lock: store.Lock{For: lockFor, Compliance: true}})))
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
	first := r.Await(t, capture.OpFull).Snapshot
	var ends []int64
	for i := range 3 {
		res, err := (etcdtest.Workload{Ops: 60, Seed: 70 + uint64(i)}).Run(ctx, cli)
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, res.LastRevision)
		for r.Status().LastRevision < res.LastRevision {
			r.Await(t, capture.OpDelta)
		}
		if i < 2 {
			if _, err := r.TakeFull(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The first two fulls are expired; the lock keeps them.
	for {
		gc := r.Await(t, capture.OpGC)
		if slices.ContainsFunc(gc.Locked, func(s snapshot.Snapshot) bool { return s.Key == first.Key }) && len(gc.Locked) >= 2 {
			break
		}
	}
	r.Stop(t)
	for _, res := range r.All() {
		if res.Err != nil {
			t.Fatalf("%s (%s) failed on a write-once bucket: %v", res.Op, res.Reason, res.Err)
		}
	}
	// Each chain restores to the end of the writes before its next full.
	for _, end := range ends {
		got, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: filepath.Join(t.TempDir(), "data")}, Read: restore.ReadOptions{Target: restore.Target{Revision: end}}})
		if err != nil || got.Revision != end {
			t.Fatalf("restore to %d: %+v, %v", end, got.Revision, err)
		}
	}
}

// Half a day of backups on a bucket whose objects are each locked for a
// while, compressed an hour to a second: 12 fulls, deltas every 100 ms under steady
// writes, retention every 300 ms keeping two fulls, and each object locked
// three seconds from its upload (a few days' lock, in the same scale). No
// write and no retention run fails; expired snapshots are reported locked
// and deleted by a later run once their lock ends; every chain left on the
// store restores to its end.
func TestADayOnABucketOfLockedObjects(t *testing.T) {
	ctx := ctxT(t)
	st := objectLockBucket(t, 0, 3*time.Second)
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	r := start(t, cli, st, capture.Options{DeltaPeriod: 100 * time.Millisecond, FullSchedule: "@every 1s", RetentionPeriod: 300 * time.Millisecond,
		Retention: snapshot.Retention{Policy: snapshot.LimitBased, MaxFulls: 2}})
	wctx, stopWrites := context.WithCancel(ctx)
	writes := make(chan error, 1)
	go func() {
		for seed := uint64(200); wctx.Err() == nil; seed++ {
			if _, err := (etcdtest.Workload{Ops: 20, Prefix: "/day/", Seed: seed}).Run(wctx, cli); err != nil && wctx.Err() == nil {
				writes <- err
				return
			}
		}
		writes <- nil
	}()
	// Until retention met a lock, and later deleted a full whose lock
	// had ended: the retry is what the day is for.
	var fulls, lockedRuns int
	deletedAfterLock := false
	lockedKeys := map[string]bool{}
	for !deletedAfterLock || fulls < 12 {
		select {
		case res := <-r.Next():
			switch {
			case res.Err != nil:
				t.Fatalf("%s (%s) failed on a bucket of locked objects: %v", res.Op, res.Reason, res.Err)
			case res.Op == capture.OpFull:
				fulls++
			case res.Op == capture.OpGC:
				if len(res.Locked) > 0 {
					lockedRuns++
				}
				for _, s := range res.Locked {
					lockedKeys[s.Key] = true
				}
				for _, s := range res.Expired {
					deletedAfterLock = deletedAfterLock || lockedKeys[s.Key]
				}
			}
		case <-ctx.Done():
			t.Fatalf("after %d fulls and %d retention runs that met a lock, no locked full was deleted once its lock ended", fulls, lockedRuns)
		}
	}
	stopWrites()
	if err := <-writes; err != nil {
		t.Fatal(err)
	}
	r.Stop(t)
	for _, res := range r.All() {
		// A retention run the stop cut short is the stop's, not a failure.
		if res.Err != nil && (res.Op != capture.OpGC || !errors.Is(res.Err, context.Canceled)) {
			t.Fatalf("%s (%s) failed: %v", res.Op, res.Reason, res.Err)
		}
	}
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	chains := cat.AllChains()
	for _, ch := range chains {
		if len(ch.Deltas) == 0 && ch.Full.Key == "" {
			continue
		}
		whole, err := ch.Check()
		if err != nil {
			t.Fatalf("chain of %s: %v", ch.Full.Key, err)
		}
		end := whole.LastRevision()
		got, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: filepath.Join(t.TempDir(), "data")}, Read: restore.ReadOptions{Target: restore.Target{Revision: end}}})
		if err != nil || got.Revision != end {
			t.Fatalf("restore of the chain of %s to %d: %d, %v", ch.Full.Key, end, got.Revision, err)
		}
	}
	t.Logf("%d fulls, %d deltas, %d retention runs (%d met a lock), no failure; %d chains on the store, each restored",
		fulls, len(r.Written(capture.OpDelta)), len(r.Written(capture.OpGC)), lockedRuns, len(chains))
}

// A second site on a locked bucket: the chains are copied there (again:
// nothing), its retention reports the expired fulls locked and fails
// nothing, and the newest chain restores from it.
func TestCopyToALockedBucket(t *testing.T) {
	ctx := ctxT(t)
	dst := lockedBucket(t)
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	src := newStore(t)
	r := start(t, cli, src, capture.Options{DeltaPeriod: 100 * time.Millisecond})
	r.Await(t, capture.OpFull)
	var end int64
	for i := range 2 {
		res, err := (etcdtest.Workload{Ops: 40, Seed: 80 + uint64(i)}).Run(ctx, cli)
		if err != nil {
			t.Fatal(err)
		}
		end = res.LastRevision
		for r.Status().LastRevision < end {
			r.Await(t, capture.OpDelta)
		}
		if i == 0 {
			if _, err := r.TakeFull(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	r.Stop(t)
	first, err := snapshot.Copy(ctx, src, dst, snapshot.CopyOptions{})
	if err != nil || len(first.Copied) == 0 {
		t.Fatalf("copy to a locked bucket: %+v, %v", first, err)
	}
	again, err := snapshot.Copy(ctx, src, dst, snapshot.CopyOptions{})
	if err != nil || len(again.Copied) != 0 {
		t.Fatalf("copy again: copied %v, %v", again.Copied, err)
	}
	gc, err := snapshot.GC(ctx, dst, snapshot.Retention{Policy: snapshot.LimitBased, MaxFulls: 1}, snapshot.GCOptions{})
	if err != nil || len(gc.Locked) == 0 || len(gc.Deleted) != 0 {
		t.Fatalf("retention on the locked copy: deleted %d, locked %d, %v", len(gc.Deleted), len(gc.Locked), err)
	}
	got, err := restore.Restore(ctx, dst, restore.Options{Member: member.Spec{DataDir: filepath.Join(t.TempDir(), "data")}})
	if err != nil || got.Revision != end {
		t.Fatalf("restore from the locked copy: %d, %v; want %d", got.Revision, err, end)
	}
}
