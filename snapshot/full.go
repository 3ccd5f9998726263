package snapshot

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/store"
)

// FullOptions configures Full. The zero value writes a plain snapshot,
// spooling through os.TempDir().
type FullOptions struct {
	Codec Codec
	// SpoolDir holds the database while its revision is read from it, so it
	// needs room for the whole database. Default: os.TempDir().
	SpoolDir string
	// Final marks the snapshot taken when the member stops for good.
	Final bool
	// BeforeUpload, when set, is called right before the object is written;
	// an error stops the snapshot. Fencing goes here: a sidecar that is no
	// longer the uploader must not write.
	BeforeUpload func(context.Context, Snapshot) error
	// Logger: nil discards.
	Logger *slog.Logger
	// Now stamps the name. Default: time.Now.
	Now func() time.Time
}

// Full streams a snapshot of the member the client talks to (etcd's
// Maintenance.Snapshot) into st. The database is spooled to disk and its
// SHA-256 trailer verified before anything is written to the store, then
// the object is named with the revision read from the database itself: a
// revision asked for before the stream could be older than what the
// stream holds, and a chain built on such a name replays revisions twice.
func Full(ctx context.Context, cli *clientv3.Client, st store.Store, opts FullOptions) (Snapshot, error) {
	if err := opts.Codec.Check(); err != nil {
		return Snapshot{}, err
	}
	log := logger(opts.Logger)
	start := time.Now()
	spool, sum, err := spoolSnapshot(ctx, cli, opts.SpoolDir)
	if err != nil {
		return Snapshot{}, err
	}
	defer func() { _ = os.Remove(spool.Name()) }()
	defer func() { _ = spool.Close() }()

	rev, err := DatabaseRevision(spool.Name())
	if err != nil {
		return Snapshot{}, err
	}
	info, err := spool.Stat()
	if err != nil {
		return Snapshot{}, fmt.Errorf("spool %s: %w", spool.Name(), err)
	}
	snap := newSnapshot(KindFull, 0, rev, now(opts.Now), opts.Codec, opts.Final)
	if opts.BeforeUpload != nil {
		if err := opts.BeforeUpload(ctx, snap); err != nil {
			return Snapshot{}, fmt.Errorf("snapshot %s: not uploaded: %w", snap.Key, err)
		}
	}
	streamed := time.Since(start)
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return Snapshot{}, fmt.Errorf("spool %s: %w", spool.Name(), err)
	}
	err = put(ctx, st, snap.Key, opts.Codec, func(w io.Writer) error {
		if _, err := io.Copy(w, spool); err != nil {
			return fmt.Errorf("spool %s: %w", spool.Name(), err)
		}
		_, err := w.Write(sum)
		return err
	})
	if err != nil {
		return Snapshot{}, err
	}
	log.Info("full snapshot written", "key", snap.Key, "revision", rev, "db-bytes", info.Size(),
		"stream", streamed.Round(time.Millisecond), "total", time.Since(start).Round(time.Millisecond))
	return snap, nil
}

// spoolSnapshot writes the member's database to a temporary file and
// returns it with the verified trailer.
func spoolSnapshot(ctx context.Context, cli *clientv3.Client, dir string) (f *os.File, sum []byte, err error) {
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd snapshot: %w", err)
	}
	defer rc.Close()
	f, err = os.CreateTemp(dir, "etcdkit-full-*.db")
	if err != nil {
		return nil, nil, fmt.Errorf("spool (set the spool directory to a volume with room for the database): %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	v := newVerifier(rc)
	if _, err := io.Copy(f, v); err != nil {
		return nil, nil, fmt.Errorf("etcd snapshot into %s: %w", f.Name(), err)
	}
	return f, v.Sum(), nil
}

var (
	bucketKey  = []byte("key")
	bucketMeta = []byte("meta")
	metaKeys   = [][]byte{[]byte("finishedCompactRev"), []byte("scheduledCompactRev")}
)

// DatabaseRevision reads the revision of an etcd bbolt database the way
// etcd's mvcc store does when it opens one: the newest revision in the key
// bucket, raised to the compaction revisions (a compaction may have removed
// the newest revision's tombstones), and at least 1.
func DatabaseRevision(path string) (int64, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		return 0, fmt.Errorf("database %s: %w", path, err)
	}
	defer func() { _ = db.Close() }()
	rev := int64(1)
	err = db.View(func(tx *bolt.Tx) error {
		keys := tx.Bucket(bucketKey)
		if keys == nil {
			return errors.New("no key bucket: not an etcd v3 database")
		}
		if k, _ := keys.Cursor().Last(); k != nil {
			r, err := mainRevision(k)
			if err != nil {
				return fmt.Errorf("key bucket: %w", err)
			}
			rev = max(rev, r)
		}
		if meta := tx.Bucket(bucketMeta); meta != nil {
			for _, name := range metaKeys {
				if v := meta.Get(name); v != nil {
					r, err := mainRevision(v)
					if err != nil {
						return fmt.Errorf("meta %s: %w", name, err)
					}
					rev = max(rev, r)
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("database %s: %w", path, err)
	}
	return rev, nil
}

// mainRevision decodes etcd's revision bytes: 8 bytes big-endian main
// revision, '_', 8 bytes sub revision, and an optional tombstone mark.
func mainRevision(b []byte) (int64, error) {
	if len(b) < 17 || b[8] != '_' {
		return 0, fmt.Errorf("%x is not a revision", b)
	}
	return int64(binary.BigEndian.Uint64(b[:8])), nil
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

func now(f func() time.Time) time.Time {
	if f == nil {
		return time.Now()
	}
	return f()
}
