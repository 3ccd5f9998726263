package etcdstorage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/pkg/v3/traceutil"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.uber.org/zap"
)

// Backend is an etcd database open for a restore: written in batches under
// one lock of etcd's batch transaction, and nothing synced until the file
// is (SyncFile) — a restore that fails leaves no data dir, so no commit on
// the way needs to last.
type Backend struct {
	be backend.Backend
	tx backend.BatchTx
	// kv is etcd's mvcc store over the database, opened only to read the
	// past or compact it (Range, LeaseTTL); lessor never expires a lease.
	kv     mvcc.KV
	lessor lease.Lessor
}

// Open opens the database at path.
func Open(path string) *Backend {
	cfg := backend.DefaultBackendConfig(zap.NewNop())
	cfg.Path = path
	cfg.UnsafeNoFsync = true
	cfg.BatchLimit = 100000
	return &Backend{be: backend.New(cfg)}
}

// Lock takes the batch transaction's lock, when not held: what follows
// until Unlock is committed whole or not at all.
func (b *Backend) Lock() {
	if b.tx == nil {
		b.tx = b.be.BatchTx()
		b.tx.LockOutsideApply()
	}
}

// Locked says whether the lock is held.
func (b *Backend) Locked() bool { return b.tx != nil }

// Unlock releases the lock, when held.
func (b *Backend) Unlock() {
	if b.tx != nil {
		b.tx.Unlock()
		b.tx = nil
	}
}

// Prepare makes the buckets a replay writes, under the lock, and returns
// the value of the meta key mark (nil: none) and the leases the database
// holds.
func (b *Backend) Prepare(mark []byte) ([]byte, []int64) {
	b.Lock()
	schema.UnsafeCreateLeaseBucket(b.tx)
	// etcd's range or write of a missing bucket ends the process.
	b.tx.UnsafeCreateBucket(schema.Meta)
	b.tx.UnsafeCreateBucket(schema.Key)
	var value []byte
	if _, vs := b.tx.UnsafeRange(schema.Meta, mark, nil, 0); len(vs) > 0 {
		value = vs[0]
	}
	var ids []int64
	for _, l := range schema.MustUnsafeGetAllLeases(b.tx) {
		ids = append(ids, l.ID)
	}
	return value, ids
}

// ForEachRevision calls f with each entry of the key bucket, in revision
// order, under the lock.
func (b *Backend) ForEachRevision(f func(k, v []byte)) {
	b.Lock()
	_ = b.tx.UnsafeForEach(schema.Key, func(k, v []byte) error {
		f(k, v)
		return nil
	})
}

// PutRevision writes an entry of the key bucket (k the revision, v the
// encoded KeyValue), in revision order, under the lock. bbolt keeps both
// slices until it commits.
func (b *Backend) PutRevision(k, v []byte) { b.tx.UnsafeSeqPut(schema.Key, k, v) }

// PutLease grants lease id with ttl seconds (at most etcd's longest),
// under the lock.
func (b *Backend) PutLease(id, ttl int64) {
	schema.MustUnsafePutLease(b.tx, &leasepb.Lease{ID: id, TTL: max(1, min(ttl, lease.MaxLeaseTTL))})
}

// DeleteLease removes lease id, under the lock.
func (b *Backend) DeleteLease(id int64) { schema.UnsafeDeleteLease(b.tx, &leasepb.Lease{ID: id}) }

// Commit commits what was written.
func (b *Backend) Commit() { b.be.ForceCommit() }

// Size is the database file's size.
func (b *Backend) Size() int64 { return b.be.Size() }

// Close commits and closes everything; the file is then a plain etcd
// database again.
func (b *Backend) Close() error {
	b.Unlock()
	var err error
	if b.kv != nil {
		err = b.kv.Close()
		b.lessor.Stop()
	}
	b.be.ForceCommit()
	return errors.Join(err, b.be.Close())
}

// store opens etcd's mvcc store over the database; the writing is over
// then.
func (b *Backend) store() mvcc.KV {
	if b.kv == nil {
		b.Unlock()
		lg := zap.NewNop()
		// A lessor that is never promoted: it knows the leases and never
		// expires one.
		b.lessor = lease.NewLessor(lg, b.be, nil, lease.LessorConfig{MinLeaseTTL: 1})
		// No one reads while Compact runs, so it need not pause between
		// batches as a serving member does.
		b.kv = mvcc.NewStore(lg, b.be, b.lessor, mvcc.StoreConfig{CompactionBatchLimit: 100000, CompactionSleepInterval: time.Microsecond})
	}
	return b.kv
}

// Range reads at most limit keys of [key, end) at revision at, as etcd's
// mvcc store answers a range.
func (b *Backend) Range(ctx context.Context, key, end []byte, at, limit int64) ([]*mvccpb.KeyValue, error) {
	// A fresh trace each time: mvcc appends a step to it for each
	// operation, so a shared one would grow with the reads. traceutil.TODO
	// is etcd's own constructor of such an empty trace.
	tr := b.store().Read(mvcc.ConcurrentReadTxMode, traceutil.TODO())
	defer tr.End()
	res, err := tr.Range(ctx, key, end, mvcc.RangeOptions{Limit: limit, Rev: at})
	if err != nil {
		return nil, fmt.Errorf("range at revision %d: %w", at, err)
	}
	return res.KVs, nil
}

// LeaseTTL is the granted TTL of lease id, and whether the database holds
// it.
func (b *Backend) LeaseTTL(id int64) (int64, bool) {
	b.store()
	if l := b.lessor.Lookup(lease.LeaseID(id)); l != nil {
		return l.TTL(), true
	}
	return 0, false
}
