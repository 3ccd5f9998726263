package compact

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdkit/etcdkit/internal/scratch"
	"github.com/etcdkit/etcdkit/restore"
	snap "github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// ReplayMemory is the Go memory limit (GOMEMLIMIT) a Compact of a large
// chain runs well in (etcd-backup compact sets it, and restore for its
// replay, which is the same): its live heap is the replay's decoded window
// and open transaction, then the copy's transaction (16 MiB of pages) and
// 40 bytes for each key of the database (compactCopy), and under this limit
// the process holds about that much anonymous memory instead of twice it
// (bench/README.md: 239 MiB for an 8 GiB database of a million keys and a
// chain of a million revisions). The database's mapped pages are released
// as it goes.
const ReplayMemory = 96 << 20

// Options configures Compact. The zero value compacts the latest chain
// into a plain full snapshot, working under os.TempDir().
type Options struct {
	// Read reads the chain; its Target picks it.
	Read restore.ReadOptions
	// Full encodes the new full snapshot (its Codec) and may fence its
	// upload (BeforeUpload); Read's Codec only reads the chain.
	Full snap.FullOptions
	// WorkDir holds the chain while it is replayed. Default os.TempDir().
	WorkDir string
}

// Result reports a Compact.
type Result struct {
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

// Compact folds a chain into one new full snapshot: it replays the
// chain, compacts the mvcc store at its last revision, defragments the
// database and uploads it, the chain's state in one object, from seconds
// of local work instead of a throwaway etcd. It deletes nothing;
// retention does that later. It is what the CLI's compact command and the
// sidecar's --compact-after call (etcd-backup-restore's word); it is
// neither etcd's keyspace compaction nor defrag's.
func Compact(ctx context.Context, st store.Store, opts Options) (Result, error) {
	start := time.Now()
	log := opts.Read.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The chain is read from, and its new full written to, the site
	// whose newest chain is whole (restore.ReadOptions.Secondary).
	st = restore.Site(ctx, st, opts.Read)
	opts.Read.Secondary = nil
	chain, err := restore.Chain(ctx, st, opts.Read.Target)
	if err != nil {
		return Result{}, err
	}
	if len(chain.Deltas) == 0 {
		// What killed compactions left is still cleared, as by any run.
		scratch.Sweep(cmp.Or(opts.WorkDir, os.TempDir()), "etcdkit-compact-")
		log.Info("chain not compacted: it has no deltas", "full", chain.Full.Key)
		return Result{Chain: chain, Snapshot: chain.Full, Unchanged: true, InputBytes: chain.Full.Size,
			OutputBytes: chain.Full.Size, Took: time.Since(start)}, nil
	}
	// Every pass over the database (the replay, the compaction, the
	// defragmentation) leaves the pages it read mapped: page cache, not
	// memory the compaction needs, released as it goes.
	db, release := "", func() {}
	defer func() { release() }()
	opts.Read.Chain = &chain
	res, err := restore.Replay(ctx, st, opts.Read, restore.ReplayOptions{WorkDir: opts.WorkDir, What: "compact", ReleasePages: true},
		func(p *restore.Past) error {
			// The compacted copy outlives the replay's scratch directory:
			// it is uploaded after.
			dir, drop, err := scratch.Dir(opts.WorkDir, "etcdkit-compact-")
			if err != nil {
				return err
			}
			db, release = filepath.Join(dir, "compacted.db"), drop
			return p.Compact(ctx, db)
		})
	if err != nil {
		return Result{}, err
	}
	s, err := snap.FullFromFile(ctx, st, db, opts.Full)
	if err != nil {
		return Result{}, fmt.Errorf("compact: %w", err)
	}
	// The new chain is the old one's, and so is its cluster; what its end
	// left of the keys is the new full's own.
	if id, ok, err := snap.ReadIdentity(ctx, st, chain.Full); err == nil && ok {
		if id.Tail, err = snap.DatabaseTail(db); err != nil {
			// Without it a sidecar reads the full itself to compare.
			id.Tail = nil
		}
		if err := snap.WriteIdentity(ctx, st, s, id); err != nil {
			log.Warn("compact: the new full's cluster identity", "key", s.Key, "error", err)
		}
	}
	out := Result{Chain: chain, Snapshot: s, Revisions: res.Revisions, Took: time.Since(start)}
	for _, in := range chain.Snapshots() {
		out.InputBytes += in.Size
	}
	if objs, err := st.List(ctx, s.Key); err == nil && len(objs) == 1 {
		out.OutputBytes = objs[0].Size
	}
	log.Info("chain compacted", "key", s.Key, "revision", s.LastRevision, "deltas", len(chain.Deltas),
		"in-bytes", out.InputBytes, "out-bytes", out.OutputBytes, "took", out.Took.Round(time.Millisecond))
	return out, nil
}
