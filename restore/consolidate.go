package restore

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/etcdkit/etcdkit/internal/datadir"
	"github.com/etcdkit/etcdkit/internal/scratch"
	snap "github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// CompactionMemory is the Go memory limit (GOMEMLIMIT) a Consolidate of a
// large chain runs well in: its live heap stays near 90 MiB (the decoded
// window, the open transaction, the index etcd's mvcc compaction builds),
// and under this limit the process holds about that much anonymous memory
// instead of twice it (bench/README.md: a 276 MB full and 500,000
// revisions). The database's mapped pages are released as it goes.
const CompactionMemory = 96 << 20

// ConsolidateOptions configures Consolidate. The zero value consolidates
// the latest chain into a plain full snapshot, working under os.TempDir().
type ConsolidateOptions struct {
	Source
	// Full encodes the new full snapshot (its Codec) and may fence its
	// upload (BeforeUpload); the Source's Codec only reads the chain.
	Full snap.FullOptions
	// WorkDir holds the chain while it is replayed. Default os.TempDir().
	WorkDir string
}

// Consolidation reports a Consolidate.
type Consolidation struct {
	Chain snap.Chain
	// Snapshot is the new full snapshot; with Unchanged, the chain's own.
	Snapshot snap.Snapshot
	// Unchanged: the chain had no deltas, so there was nothing to compact
	// and nothing was written (a second compaction in a row is one).
	Unchanged bool
	// Revisions replayed from deltas into it.
	Revisions int64
	// InputBytes are the chain's objects; OutputBytes the new one.
	InputBytes, OutputBytes int64
	Took                    time.Duration
}

// Consolidate folds a chain into one new full snapshot: it replays the
// chain, compacts the mvcc store at its last revision, defragments the
// database and uploads it, the chain's state in one object, from seconds
// of local work instead of a throwaway etcd. It deletes nothing;
// retention does that later. It is what the CLI's compact command and the
// sidecar's --compact-after call (etcd-backup-restore's word); it is
// neither etcd's mvcc compaction nor defrag's Compact option.
func Consolidate(ctx context.Context, st store.Store, opts ConsolidateOptions) (Consolidation, error) {
	start := time.Now()
	opts.Source = opts.withDefaults()
	chain, err := Chain(ctx, st, opts.Target)
	if err != nil {
		return Consolidation{}, err
	}
	if len(chain.Deltas) == 0 {
		// What killed compactions left is still cleared, as by any run.
		scratch.Sweep(cmp.Or(opts.WorkDir, os.TempDir()), "etcdkit-compact-")
		opts.Logger.Info("chain not compacted: it has no deltas", "full", chain.Full.Key)
		return Consolidation{Chain: chain, Snapshot: chain.Full, Unchanged: true, InputBytes: chain.Full.Size,
			OutputBytes: chain.Full.Size, Took: time.Since(start)}, nil
	}
	work, release, err := scratch.Dir(opts.WorkDir, "etcdkit-compact-")
	if err != nil {
		return Consolidation{}, fmt.Errorf("compact: %w", err)
	}
	defer release()
	// Every pass over the database (the replay, the compaction, the
	// defragmentation) leaves the pages it read mapped: page cache, not
	// memory the compaction needs, released as it goes (unmap).
	src := opts.Source
	src.unmap = true
	res, r, err := replayChain(ctx, st, chain, filepath.Join(work, fullFile), work, src, true)
	if err != nil {
		return Consolidation{}, err
	}
	if err := r.compact(ctx); err != nil {
		_ = r.close()
		return Consolidation{}, fmt.Errorf("compact: %w", err)
	}
	if err := r.close(); err != nil {
		return Consolidation{}, fmt.Errorf("compact: %w", err)
	}
	db := filepath.Join(work, "defragmented.db")
	if err := defragment(ctx, r.path, db); err != nil {
		return Consolidation{}, fmt.Errorf("compact: defragment: %w", err)
	}
	if err := os.Remove(r.path); err != nil {
		return Consolidation{}, fmt.Errorf("compact: %w", err)
	}
	s, err := snap.FullFromFile(ctx, st, db, opts.Full)
	if err != nil {
		return Consolidation{}, fmt.Errorf("compact: %w", err)
	}
	// The new chain is the old one's, and so is its cluster; what its end
	// left of the keys is the new full's own.
	if id, ok, err := snap.ReadIdentity(ctx, st, chain.Full); err == nil && ok {
		if id.Tail, err = snap.DatabaseTail(db); err != nil {
			// Without it a sidecar reads the full itself to compare.
			id.Tail = nil
		}
		if err := snap.WriteIdentity(ctx, st, s, id); err != nil {
			opts.Logger.Warn("compact: the new full's cluster identity", "key", s.Key, "error", err)
		}
	}
	out := Consolidation{Chain: chain, Snapshot: s, Revisions: res.Revisions, Took: time.Since(start)}
	for _, in := range chain.Snapshots() {
		out.InputBytes += in.Size
	}
	if objs, err := st.List(ctx, s.Key); err == nil && len(objs) == 1 {
		out.OutputBytes = objs[0].Size
	}
	opts.Logger.Info("chain compacted", "key", s.Key, "revision", s.LastRevision, "deltas", len(chain.Deltas),
		"in-bytes", out.InputBytes, "out-bytes", out.OutputBytes, "took", out.Took.Round(time.Millisecond))
	return out, nil
}

// compact drops every revision but the last of each key, as etcd does on
// a compaction.
func (r *replayer) compact(ctx context.Context) error {
	done, err := r.store().Compact(untraced(), r.at)
	if err != nil {
		return fmt.Errorf("mvcc compaction at %d: %w", r.at, err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.releaseMapped()
	return nil
}

// defragBatch is what one transaction of defragment copies: its pages are
// Go memory until the commit writes them.
const defragBatch = 16 << 20

// defragment copies the database at src into a new file at dst, bucket by
// bucket and key by key, its pages filled as etcd's defragmentation fills
// them (90 %). It is etcd's Defrag without that one's cost at this size:
// etcd maps its new file with MAP_POPULATE and grows the map by doubling,
// and every growth copies each page the open transaction holds (a 355 MB
// database took 9 s, most of it copying). Here the new file is mapped
// once, as large as the old one, and nothing in it is synced: it is a
// scratch file, uploaded and removed.
func defragment(ctx context.Context, src, dst string) error {
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	in, err := bolt.Open(src, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	defer func() { _ = in.Close() }()
	out, err := bolt.Open(dst, 0o600, &bolt.Options{NoSync: true, NoGrowSync: true, NoFreelistSync: true,
		FreelistType: bolt.FreelistMapType, InitialMmapSize: int(info.Size()) + 64<<20, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	defer func() { _ = out.Close() }()
	dir := filepath.Dir(dst)
	return in.View(func(tx *bolt.Tx) error {
		w, err := out.Begin(true)
		if err != nil {
			return err
		}
		defer func() { _ = w.Rollback() }()
		var batch int
		err = tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			ob, err := w.CreateBucketIfNotExists(name)
			if err != nil {
				return fmt.Errorf("bucket %s: %w", name, err)
			}
			ob.FillPercent = 0.9
			return b.ForEach(func(k, v []byte) error {
				if batch += len(k) + len(v); batch > defragBatch {
					if err := w.Commit(); err != nil {
						return err
					}
					if err := ctx.Err(); err != nil {
						return err
					}
					// Between transactions nothing remaps either file:
					// the pages both maps read stay in the page cache,
					// not in this process.
					_ = datadir.ReleaseMapped(dir)
					if w, err = out.Begin(true); err != nil {
						return err
					}
					ob = w.Bucket(name)
					ob.FillPercent = 0.9
					batch = len(k) + len(v)
				}
				return ob.Put(k, v)
			})
		})
		if err != nil {
			return err
		}
		return w.Commit()
	})
}

// releaseMapped releases the database's mapped pages between passes,
// under the backend's lock, so bbolt cannot remap meanwhile.
func (r *replayer) releaseMapped() {
	tx := r.b.BatchTx()
	tx.LockOutsideApply()
	defer tx.Unlock()
	_ = datadir.ReleaseMapped(filepath.Dir(r.path))
}
