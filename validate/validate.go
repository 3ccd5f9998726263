package validate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/etcdkit/etcdkit/etcdversion"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/etcdkit/etcdkit/internal/database"
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
	// OtherVersion: the data is another etcd release's, one the etcd that
	// is to run it cannot start on (etcd steps one minor at a time, and
	// down only through its downgrade API). A fact of the data, not
	// damage: run a release that starts on it (Report.Release.Starts).
	OtherVersion Verdict = "OtherVersion"
	// Removed: the cluster removed the member this data dir is of, on
	// purpose, and the member applied it (its ID is in the database's
	// members_removed bucket); or the bucket cannot be read, and whether it
	// did cannot be told. Either way the member stays out.
	Removed Verdict = "Removed"
)

// Mode is how deep DataDir looks.
type Mode string

const (
	// Sanity checks the layout, the guard, that the database opens with its
	// buckets, the last WAL segment, and the revision against the backups.
	Sanity Mode = "sanity"
	// Full adds a walk of every database page, every WAL segment's records
	// and CRC chain, and the snap files.
	Full Mode = "full"
)

// Options configures DataDir. The zero value runs the sanity checks of a
// single member's data dir with no backup to compare with.
type Options struct {
	// Mode: default Sanity.
	Mode Mode
	// Name and Token, when set, must match the data dir's guard file.
	Name, Token string
	// BackupRevision is the newest revision the backups hold, 0 when
	// there are none: a data dir behind it is Behind. The caller reads
	// the store (package startup does, once per start-up).
	BackupRevision int64
	// MultiMember skips the Behind check: peers catch a member up.
	MultiMember bool
	// Etcd is the etcd release that is to start on the data dir: another
	// release's data it cannot start on is OtherVersion. Zero: the release
	// this module is built with (version.Version).
	Etcd etcdversion.Version
	// WALDir is etcd's wal-dir, a WAL kept outside the data dir; "" when
	// the WAL is the data dir's member/wal.
	WALDir string
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
	// MemberID and ClusterID are the WAL's word on whose data this is; 0
	// when the WAL was not read.
	MemberID, ClusterID uint64
	// Release is what the data dir says of the etcd releases that ran it;
	// Etcd is the release it was judged for.
	Release Release
	Etcd    etcdversion.Version
	Checks  []Check
}

func (r *Report) verdict(v Verdict, file, format string, args ...any) Report {
	r.Verdict, r.File, r.Reason = v, file, fmt.Sprintf(format, args...)
	return *r
}

// DataDir checks an etcd data dir and returns its verdict. It never
// modifies the data dir. Damage is a verdict, not an error; an error means
// the checks themselves could not run (ctx ended).
func DataDir(ctx context.Context, dir string, opts Options) (Report, error) {
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}
	opts = opts.withDefaults()
	r := &Report{Etcd: opts.Etcd}
	var mu sync.Mutex
	timed := func(name string, f func() error) error {
		start := time.Now()
		err := f()
		mu.Lock()
		r.Checks = append(r.Checks, Check{Name: name, Took: time.Since(start), Err: err})
		mu.Unlock()
		return err
	}
	member := filepath.Join(dir, "member")
	walDir := filepath.Join(member, "wal")
	if opts.WALDir != "" {
		walDir = opts.WALDir
	}
	if _, err := os.Stat(member); errors.Is(err, os.ErrNotExist) {
		if opts.WALDir != "" && holdsWAL(walDir) {
			return r.verdict(Corrupt, walDir, "the WAL dir %s holds a WAL, but the data dir %s has no member directory: the data dir was lost, or another volume is mounted there", walDir, dir), nil
		}
		return r.verdict(Empty, member, "no member directory"), nil
	}
	for _, p := range []string{filepath.Join(member, "snap"), walDir} {
		if info, err := os.Stat(p); err != nil || !info.IsDir() {
			return r.verdict(Corrupt, p, "layout: %s is missing or not a directory", p), nil
		}
	}
	if v, file, reason := checkGuard(dir, opts.Name, opts.Token); v != "" {
		return r.verdict(v, file, "%s", reason), nil
	}

	dbPath := filepath.Join(member, "snap", "db")
	var (
		db    *bolt.DB
		facts dbFacts
	)
	err := timed("database", func() error {
		var err error
		db, facts, err = openDatabase(dbPath, opts.LockTimeout)
		return err
	})
	r.Revision, r.Release = facts.revision, facts.release
	var locked *lockedError
	switch {
	case errors.As(err, &locked):
		return r.verdict(Locked, dbPath, "%v", err), nil
	case err != nil:
		return r.verdict(Corrupt, dbPath, "%v", err), nil
	}
	// The database stays open, and so locked, while its pages are walked.
	defer func() { _ = db.Close() }()

	// In full mode the page walk and the WAL are read side by side: they
	// are separate files, each bound by a core.
	var (
		w               files.WAL
		walErr, pageErr error
		wg              sync.WaitGroup
	)
	if opts.Mode == Full {
		wg.Go(func() {
			pageErr = timed("pages", func() error { return files.WalkPages(dbPath) })
		})
	}
	walErr = timed("wal", func() error {
		var err error
		w, err = files.ReadWAL(walDir, facts.cindex, opts.Mode == Full)
		return err
	})
	wg.Wait()
	if pageErr != nil {
		return r.verdict(Corrupt, dbPath, "database %s: %v", dbPath, pageErr), nil
	}
	if walErr != nil {
		return r.verdict(Corrupt, walDir, "%v", walErr), nil
	}
	r.WALEntries, r.MemberID, r.ClusterID = w.Unapplied, w.MemberID, w.ClusterID
	r.Release.V2Entries, r.Release.FirstV2, r.Release.V2Custom = w.Foreign, w.FirstForeign, w.V2Custom
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
	return r.judge(facts, w, dbPath, opts), nil
}

// judge gives the verdict on a data dir whose files read: membership
// first, then the release, then how far its revision reaches.
func (r *Report) judge(facts dbFacts, w files.WAL, dbPath string, opts Options) Report {
	// A member the cluster removed stays out, whatever else holds: it is
	// read before the release, which a removed member's data may be of.
	id := fmt.Sprintf("%x", r.MemberID)
	switch {
	case facts.removedErr != nil:
		return r.verdict(Removed, dbPath, "whether the cluster removed member %s cannot be told: %v; it stays out (move the data dir aside by hand to let it join again)", id, facts.removedErr)
	case facts.removed[id]:
		return r.verdict(Removed, dbPath, "the cluster removed member %s on purpose (its data dir's members_removed bucket lists it): it stays out; a member that is to come back joins with an empty data dir", id)
	}
	if why := r.Release.Refuses(opts.Etcd); why != "" {
		return r.verdict(OtherVersion, dbPath, "%s; etcd %s is to run it", why, opts.Etcd)
	}
	sound := "the database and the WAL are sound"
	if w.Torn {
		sound += "; the WAL's last record is torn, as a crash leaves it, and etcd repairs it at start"
	}
	if v := r.Release.Written(); v.Trim() != opts.Etcd.Trim() {
		sound += fmt.Sprintf("; etcd %s's data (%s), which etcd %s starts on", v.MinorString(), r.Release, opts.Etcd)
	}

	if opts.MultiMember {
		return r.verdict(Valid, "", "%s; peers bring a member of a multi-member cluster up to date", sound)
	}
	r.BackupRevision = opts.BackupRevision
	if r.BackupRevision > r.Revision+r.WALEntries {
		return r.verdict(Behind, dbPath, "the database is at revision %d with %d WAL entries to apply; the backups reach revision %d", r.Revision, r.WALEntries, r.BackupRevision)
	}
	return r.verdict(Valid, "", "%s", sound)
}

// withDefaults fills the zero values of o as Options documents them.
func (o Options) withDefaults() Options {
	if o.Mode == "" {
		o.Mode = Sanity
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = time.Second
	}
	if o.Etcd.IsZero() {
		o.Etcd = etcdversion.Linked()
	}
	return o
}

// holdsWAL says whether dir holds WAL segments.
func holdsWAL(dir string) bool {
	segments, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	return len(segments) > 0
}

// lockedError is a database another process holds.
type lockedError struct{ error }

// dbFacts are what openDatabase read.
type dbFacts struct {
	revision   int64
	cindex     uint64
	release    Release
	removed    map[string]bool
	removedErr error
}

// openDatabase opens the database read-only, which takes its shared
// lock, and reads its revision, consistent index, releases and removed
// members.
func openDatabase(path string, timeout time.Duration) (db *bolt.DB, facts dbFacts, err error) {
	// bbolt asserts its invariants with panics, and follows page pointers
	// into its mapping unchecked: on a damaged file a panic or a fault is
	// the verdict, not a crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if _, fault := p.(interface{ Addr() uintptr }); fault {
				p = "a page pointer leads past the end of the file (the read faulted)"
			}
			err = fmt.Errorf("database %s: %v", path, p)
		}
		if err != nil && db != nil {
			_ = db.Close()
			db = nil
		}
	}()
	// A file shorter than its meta page says would fault when mapped.
	if err := files.CheckLength(path); err != nil {
		return nil, facts, fmt.Errorf("database %s: %w", path, err)
	}
	db, err = bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: timeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, facts, &lockedError{fmt.Errorf("database %s is locked by another process (a running etcd?)", path)}
	}
	if err != nil {
		return nil, facts, fmt.Errorf("database %s: %w", path, err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		for _, name := range requiredBuckets {
			if tx.Bucket([]byte(name)) == nil {
				return fmt.Errorf("bucket %q is missing", name)
			}
		}
		if v := tx.Bucket([]byte("meta")).Get([]byte("consistent_index")); len(v) == 8 {
			facts.cindex = binary.BigEndian.Uint64(v)
		}
		var err error
		if facts.release, err = ReadRelease(tx); err != nil {
			return err
		}
		// An unreadable bucket is no damage to the keyspace: it keeps the
		// member out rather than let it be added again (fail closed).
		facts.removed, facts.removedErr = removedMembers(tx)
		return nil
	})
	if err != nil {
		return db, facts, fmt.Errorf("database %s: %w", path, err)
	}
	// Read as snapshot reads a full's, so the two never differ.
	if facts.revision, err = database.Revision(path); err != nil {
		return db, facts, err
	}
	return db, facts, nil
}

// requiredBuckets are those every etcd 3.5+ database has.
var requiredBuckets = []string{"key", "meta", "lease", "members", "cluster"}
