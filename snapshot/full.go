package snapshot

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/etcdkit/etcdkit/internal/database"
	"github.com/etcdkit/etcdkit/internal/scratch"
	"github.com/etcdkit/etcdkit/store"
)

// FullOptions configures a full snapshot written to a store. The zero value writes a plain snapshot,
// spooling through os.TempDir().
type FullOptions struct {
	Codec Codec
	// SpoolDir holds the database while its revision is read from it, and
	// the encoded object until it is uploaded: room for the database and,
	// when compressing or encrypting for a remote store, the object too.
	// Default: os.TempDir(). A plain snapshot to the file store is spooled
	// in the store's own directory and renamed into place instead.
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

// WriteFull writes db, an etcd database followed by its SHA-256 as etcd's
// Maintenance.Snapshot streams it, as a full snapshot in st. The object is
// named with the revision read from the database itself, after its trailer
// was verified: a revision asked for before the stream can be older than
// what the stream holds, and a chain built on such a name replays
// revisions twice. So the database is spooled to disk and encoded in the
// same pass; nothing reaches the store before the name is known. When id
// is not nil it is recorded as the full's identity, with the tail its
// database left (what a cluster that continues the chain holds); a failed
// identity record is logged, not returned: the snapshot is sound without
// it, and its chain is then nobody's in particular, as
// etcd-backup-restore's are.
func WriteFull(ctx context.Context, st store.Store, db io.Reader, id *Identity, opts FullOptions) (Snapshot, error) {
	if err := opts.Codec.Check(); err != nil {
		return Snapshot{}, err
	}
	start := time.Now()
	if opts.SpoolDir == "" {
		opts.SpoolDir = os.TempDir()
	}
	sp, err := newSpool(st, opts)
	if err != nil {
		return Snapshot{}, err
	}
	defer sp.discard()
	if err := sp.fill(db); err != nil {
		return Snapshot{}, err
	}
	rev, err := DatabaseRevision(sp.raw.Name())
	if err != nil {
		return Snapshot{}, err
	}
	var idErr error
	if id != nil {
		id.Tail, _, idErr = dbTail(sp.raw.Name())
	}
	if err := sp.finish(); err != nil {
		return Snapshot{}, err
	}
	snap := newSnapshot(KindFull, 0, rev, now(opts.Now), opts.Codec, opts.Final)
	if opts.BeforeUpload != nil {
		if err := opts.BeforeUpload(ctx, snap); err != nil {
			return Snapshot{}, fmt.Errorf("snapshot %s: not uploaded: %w", snap.Key, err)
		}
	}
	streamed := time.Since(start)
	// A full of the same revision taken in the same second (users, leases
	// or members changed, which move no revision) takes the next second's
	// name: a full is never dropped for its name.
	for tries := 1; ; tries++ {
		snap.Size, err = sp.upload(ctx, st, snap.Key)
		if !errors.Is(err, ErrConflict) || tries == 10 {
			break
		}
		logger(opts.Logger).Info("a full snapshot of this revision with other contents was written in this second; naming this one with a later one", "key", snap.Key)
		snap = newSnapshot(KindFull, 0, rev, later(now(opts.Now), snap.Created.Add(time.Second)), opts.Codec, opts.Final)
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %s: %w", snap.Key, err)
	}
	cluster := ""
	if id != nil && idErr == nil {
		idErr = WriteIdentity(ctx, st, snap, *id)
		cluster = id.ClusterID
	}
	if idErr != nil {
		logger(opts.Logger).Warn("full snapshot written without its cluster identity", "key", snap.Key, "error", idErr)
	}
	logger(opts.Logger).Info("full snapshot written", "key", snap.Key, "revision", rev, "cluster", cluster, "db-bytes", sp.size,
		"stream", streamed.Round(time.Millisecond), "total", time.Since(start).Round(time.Millisecond))
	return snap, nil
}

// spool holds a full snapshot on local disk between the stream and the
// store: raw is the database (bbolt reads the revision from it) and object
// is what the store receives. A plain snapshot has one file for both.
type spool struct {
	codec  Codec
	stager store.Stager // set when object is a file the store stages
	raw    *os.File
	object *os.File
	enc    io.WriteCloser
	sum    []byte
	size   int64
}

func newSpool(st store.Store, opts FullOptions) (_ *spool, err error) {
	sp := &spool{codec: opts.Codec}
	defer func() {
		if err != nil {
			sp.discard()
		}
	}()
	plain := opts.Codec.Compression == None && !opts.Codec.encrypts()
	if stager, ok := store.AsStager(st); ok {
		sp.stager = stager
		if sp.object, err = stager.Stage(); err != nil {
			return nil, err
		}
	} else if !plain {
		if sp.object, err = scratch.File(opts.SpoolDir, "etcdkit-object-*"); err != nil {
			return nil, fmt.Errorf("spool directory %s (it must exist, with room for the snapshot): %w", opts.SpoolDir, err)
		}
	}
	if plain && sp.object != nil {
		sp.raw = sp.object
	} else if sp.raw, err = scratch.File(opts.SpoolDir, "etcdkit-full-*.db"); err != nil {
		return nil, fmt.Errorf("spool directory %s (it must exist, with room for the database): %w", opts.SpoolDir, err)
	}
	if plain && sp.object == nil {
		sp.object = sp.raw
	}
	if !plain {
		if sp.enc, err = opts.Codec.encoder(sp.object, bulk); err != nil {
			return nil, err
		}
	}
	return sp, nil
}

// fill streams db into the spool, verifying etcd's trailer.
func (sp *spool) fill(db io.Reader) error {
	var w io.Writer = sp.raw
	if sp.enc != nil {
		w = io.MultiWriter(sp.raw, sp.enc)
	}
	v := newVerifier(db)
	n, err := decoupledCopy(w, v)
	if err != nil {
		return fmt.Errorf("snapshot into %s: %w", sp.raw.Name(), err)
	}
	sp.size, sp.sum = n, v.Sum()
	return nil
}

// decoupledCopy reads ahead of the writer by up to 8 MiB, so etcd's
// stream does not wait for each block to be compressed and written: the
// copy takes as long as the slower side, not the sum of both.
func decoupledCopy(w io.Writer, r io.Reader) (int64, error) {
	const chunk, ahead = 1 << 20, 8
	full := make(chan []byte, ahead)
	free := make(chan []byte, ahead+1)
	for range ahead + 1 {
		free <- make([]byte, chunk)
	}
	readErr := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		defer close(full)
		for {
			var buf []byte
			select {
			case buf = <-free:
			case <-stop:
				readErr <- nil
				return
			}
			n, err := io.ReadFull(r, buf)
			if n > 0 {
				full <- buf[:n]
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				readErr <- nil
				return
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()
	var written int64
	for buf := range full {
		n, err := w.Write(buf)
		written += int64(n)
		if err != nil {
			close(stop)
			for range full {
			}
			return written, errors.Join(err, <-readErr)
		}
		free <- buf[:cap(buf)]
	}
	return written, <-readErr
}

// finish appends the trailer to the object: etcd's own, so the object is
// what etcd streamed.
func (sp *spool) finish() error {
	if sp.enc == nil {
		if _, err := sp.object.Write(sp.sum); err != nil {
			return fmt.Errorf("spool %s: %w", sp.object.Name(), err)
		}
		return nil
	}
	if _, err := sp.enc.Write(sp.sum); err != nil {
		return fmt.Errorf("spool %s: %w", sp.object.Name(), err)
	}
	if err := sp.enc.Close(); err != nil {
		return fmt.Errorf("spool %s: %w", sp.object.Name(), err)
	}
	return nil
}

// upload writes the spooled object and returns its size. An object of
// that name there already is this snapshot when it holds the same bytes
// (an earlier attempt that landed); with other bytes, ErrConflict.
func (sp *spool) upload(ctx context.Context, st store.Store, key string) (int64, error) {
	info, err := sp.object.Stat()
	if err != nil {
		return 0, fmt.Errorf("spool %s: %w", sp.object.Name(), err)
	}
	exists := fmt.Errorf("store %s: put %s: %w", st, key, store.ErrExists)
	if sp.stager != nil {
		// The staged file goes when the put fails: look first.
		if objs, err := st.List(ctx, key); err == nil && slices.ContainsFunc(objs, func(o store.Object) bool { return o.Key == key }) {
			return info.Size(), sp.same(ctx, st, key, info.Size(), exists)
		}
		obj := sp.object
		sp.object = nil // PutStaged owns it now, even when it fails
		if sp.raw == obj {
			sp.raw = nil
		}
		return info.Size(), sp.stager.PutStaged(ctx, key, obj)
	}
	if _, err := sp.object.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("spool %s: %w", sp.object.Name(), err)
	}
	if err = st.Put(ctx, key, sp.object); errors.Is(err, store.ErrExists) {
		err = sp.same(ctx, st, key, info.Size(), err)
	}
	return info.Size(), err
}

// same compares the object key with the spooled one: nil when equal, else
// ErrConflict wrapping exists.
func (sp *spool) same(ctx context.Context, st store.Store, key string, size int64, exists error) error {
	h := crc32.New(castagnoli)
	if _, err := sp.object.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("%w: %w", ErrConflict, exists)
	}
	if _, err := io.Copy(h, sp.object); err != nil {
		return fmt.Errorf("%w: %w", ErrConflict, exists)
	}
	return sameObject(ctx, st, key, size, h.Sum(nil), exists)
}

func (sp *spool) discard() {
	for _, f := range []*os.File{sp.raw, sp.object} {
		if f != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}
}

// DatabaseRevision reads the revision of an etcd bbolt database the way
// etcd's mvcc store does when it opens one: the newest revision in the key
// bucket, raised to the compaction revisions (a compaction may have removed
// the newest revision's tombstones), and at least 1.
func DatabaseRevision(path string) (int64, error) { return database.Revision(path) }

// DatabaseTail reads what the newest revisions of an etcd bbolt database
// left of their keys: what a cluster that continues a chain whose full it
// is holds at its revision (Identity.Tail).
func DatabaseTail(path string) ([]KeyVersion, error) {
	tail, _, err := dbTail(path)
	return tail, err
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
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

// FullFromFile writes an etcd database file as a full snapshot, as if
// etcd had streamed it: the object is the file with its SHA-256 appended,
// encoded by opts.Codec and named with the revision read from the file.
// Package restore writes compacted chains this way.
func FullFromFile(ctx context.Context, st store.Store, path string, opts FullOptions) (Snapshot, error) {
	if err := opts.Codec.Check(); err != nil {
		return Snapshot{}, err
	}
	rev, err := DatabaseRevision(path)
	if err != nil {
		return Snapshot{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return Snapshot{}, err
	}
	defer func() { _ = f.Close() }()
	snap := newSnapshot(KindFull, 0, rev, now(opts.Now), opts.Codec, opts.Final)
	if opts.BeforeUpload != nil {
		if err := opts.BeforeUpload(ctx, snap); err != nil {
			return Snapshot{}, fmt.Errorf("snapshot %s: not uploaded: %w", snap.Key, err)
		}
	}
	snap.Size, err = put(ctx, st, snap.Key, opts.Codec, bulk, func(w io.Writer) error {
		h := sha256.New()
		if _, err := io.Copy(io.MultiWriter(w, h), f); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		_, err := w.Write(h.Sum(nil))
		return err
	})
	if err != nil {
		return Snapshot{}, err
	}
	return snap, nil
}
