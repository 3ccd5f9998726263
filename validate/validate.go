package validate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/validate/internal/files"
)

// Verdict is what a data dir is fit for.
type Verdict string

const (
	// Valid: start the member on it.
	Valid Verdict = "Valid"
	// Empty: no member directory; bootstrap or join.
	Empty Verdict = "Empty"
	// Corrupt: the database, the WAL or a snap file is damaged.
	Corrupt Verdict = "Corrupt"
	// Behind: the backups hold revisions this data dir would lose.
	Behind Verdict = "Behind"
	// WrongVolume: the data dir belongs to another member or cluster.
	WrongVolume Verdict = "WrongVolume"
	// Locked: another process (an etcd) holds the database.
	Locked Verdict = "Locked"
)

// Mode is how deep DataDir looks.
type Mode string

const (
	// Sanity checks the layout, the guard, that the database opens with its
	// buckets, and the revision against the backups.
	Sanity Mode = "sanity"
	// Full adds a walk of every database page, the WAL's records and CRCs,
	// and the snap files.
	Full Mode = "full"
)

// Options configures DataDir. The zero value runs the sanity checks of a
// single member's data dir with no backup to compare with.
type Options struct {
	// Mode: default Sanity.
	Mode Mode
	// Name and Token, when set, must match the data dir's guard file.
	Name, Token string
	// BackupRevision, when not 0, is the newest revision on the store;
	// Store, when set and BackupRevision is 0, is read for it.
	BackupRevision int64
	Store          store.Store
	// MultiMember skips the Behind check: peers catch a member up.
	MultiMember bool
	// LockTimeout is how long the database's lock is waited for before
	// the verdict is Locked. Default 1 s.
	LockTimeout time.Duration
	// Logger: nil discards.
	Logger *slog.Logger
}

// Check is one check DataDir ran.
type Check struct {
	Name string
	Took time.Duration
	Err  error
}

// Report is DataDir's verdict and how it got there.
type Report struct {
	Verdict Verdict
	// Reason says which check decided and why; File names the file.
	Reason string
	File   string
	// Revision is the database's revision; WALEntries the WAL's entries
	// not yet applied to it.
	Revision   int64
	WALEntries int64
	// BackupRevision is the newest revision on the store, 0 if unknown.
	BackupRevision int64
	Checks         []Check
}

func (r *Report) verdict(v Verdict, file, format string, args ...any) Report {
	r.Verdict, r.File, r.Reason = v, file, fmt.Sprintf(format, args...)
	return *r
}

// DataDir checks an etcd data dir and returns its verdict. It never
// modifies the data dir. An error means the checks themselves could not
// run (the store could not be read, say); damage is a verdict, not an error.
func DataDir(ctx context.Context, dir string, opts Options) (Report, error) {
	if opts.Mode == "" {
		opts.Mode = Sanity
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = time.Second
	}
	r := &Report{}
	timed := func(name string, f func() error) error {
		start := time.Now()
		err := f()
		r.Checks = append(r.Checks, Check{Name: name, Took: time.Since(start), Err: err})
		return err
	}
	member := filepath.Join(dir, "member")
	if _, err := os.Stat(member); errors.Is(err, os.ErrNotExist) {
		return r.verdict(Empty, member, "no member directory"), nil
	}
	for _, sub := range []string{"snap", "wal"} {
		p := filepath.Join(member, sub)
		if info, err := os.Stat(p); err != nil || !info.IsDir() {
			return r.verdict(Corrupt, p, "layout: %s is missing or not a directory", p), nil //nolint:nilerr // damage is a verdict
		}
	}
	if v, file, reason := checkGuard(dir, opts.Name, opts.Token); v != "" {
		return r.verdict(v, file, "%s", reason), nil
	}

	dbPath := filepath.Join(member, "snap", "db")
	var cindex uint64
	err := timed("database", func() error {
		var err error
		r.Revision, cindex, err = readDatabase(dbPath, opts.LockTimeout, opts.Mode == Full)
		return err
	})
	var locked *lockedError
	switch {
	case errors.As(err, &locked):
		return r.verdict(Locked, dbPath, "%v", err), nil
	case err != nil:
		return r.verdict(Corrupt, dbPath, "%v", err), nil
	}

	walDir := filepath.Join(member, "wal")
	var w files.WAL
	err = timed("wal", func() error {
		var err error
		w, err = files.ReadWAL(walDir, cindex)
		return err
	})
	if err != nil {
		return r.verdict(Corrupt, walDir, "%v", err), nil
	}
	r.WALEntries = w.Unapplied
	if opts.Mode == Full {
		var file string
		if err := timed("snap", func() error {
			var err error
			file, err = files.CheckSnaps(filepath.Join(member, "snap"), w.Snapshot)
			return err
		}); err != nil {
			return r.verdict(Corrupt, file, "%v", err), nil
		}
	}
	sound := "the database and the WAL are sound"
	if w.Torn {
		sound += "; the WAL's last record is torn, as a crash leaves it, and etcd repairs it at start"
	}

	if opts.MultiMember {
		return r.verdict(Valid, "", "%s; peers bring a member of a multi-member cluster up to date", sound), nil
	}
	if err := timed("backup", func() error {
		var err error
		r.BackupRevision, err = backupRevision(ctx, opts)
		return err
	}); err != nil {
		return *r, err
	}
	if r.BackupRevision > r.Revision+r.WALEntries {
		return r.verdict(Behind, dbPath, "the database is at revision %d with %d WAL entries to apply; the backups reach revision %d", r.Revision, r.WALEntries, r.BackupRevision), nil
	}
	return r.verdict(Valid, "", "%s", sound), nil
}

// lockedError is a database another process holds.
type lockedError struct{ error }

// readDatabase opens the database read-only and returns its revision and
// consistent index; deep walks every page.
func readDatabase(path string, timeout time.Duration, deep bool) (rev int64, cindex uint64, err error) {
	// bbolt asserts its invariants with panics; on a damaged file those
	// are the verdict, not a crash.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("database %s: %v", path, p)
		}
	}()
	// A file shorter than its meta page says would fault when mapped.
	if err := files.CheckLength(path); err != nil {
		return 0, 0, fmt.Errorf("database %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: timeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return 0, 0, &lockedError{fmt.Errorf("database %s is locked by another process (a running etcd?)", path)}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("database %s: %w", path, err)
	}
	defer func() { _ = db.Close() }()
	err = db.View(func(tx *bolt.Tx) error {
		for _, name := range requiredBuckets {
			if tx.Bucket([]byte(name)) == nil {
				return fmt.Errorf("bucket %q is missing", name)
			}
		}
		if v := tx.Bucket([]byte("meta")).Get([]byte("consistent_index")); len(v) == 8 {
			cindex = binary.BigEndian.Uint64(v)
		}
		var err error
		if rev, err = snapshot.TxRevision(tx); err != nil {
			return err
		}
		if deep {
			// Our walk, not bbolt's tx.Check: that one panics in a
			// goroutine of its own, where no recover reaches, on pages it
			// cannot read, and what it checks beyond the tree — the
			// freelist — etcd does not write (NoFreelistSync).
			if err := files.WalkPages(path); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("database %s: %w", path, err)
	}
	return rev, cindex, nil
}

// requiredBuckets are those every etcd 3.5+ database has.
var requiredBuckets = []string{"key", "meta", "lease", "members", "cluster"}

// backupRevision is the newest revision on the store, or the given one.
func backupRevision(ctx context.Context, opts Options) (int64, error) {
	if opts.BackupRevision > 0 || opts.Store == nil {
		return opts.BackupRevision, nil
	}
	cat, err := snapshot.List(ctx, opts.Store)
	if err != nil {
		return 0, err
	}
	chain, err := cat.Latest()
	if errors.Is(err, snapshot.ErrNoFull) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if chain, err = chain.Check(); err != nil {
		return 0, err
	}
	return chain.LastRevision(), nil
}
