package validate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
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
	var w walState
	err = timed("wal", func() error {
		var err error
		w, err = readWAL(walDir, cindex)
		return err
	})
	if err != nil {
		return r.verdict(Corrupt, walDir, "%v", err), nil
	}
	r.WALEntries = w.unapplied
	if opts.Mode == Full {
		var file string
		if err := timed("snap", func() error {
			var err error
			file, err = checkSnaps(filepath.Join(member, "snap"), w.snapshot)
			return err
		}); err != nil {
			return r.verdict(Corrupt, file, "%v", err), nil
		}
	}
	sound := "the database and the WAL are sound"
	if w.torn {
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
	if err := checkLength(path); err != nil {
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
			// bbolt's own walk panics on a page it cannot read, in a
			// goroutine of its own where no recover reaches: the page
			// headers are checked first, without it.
			if err := walkPages(path); err != nil {
				return err
			}
			for err := range tx.Check() {
				return fmt.Errorf("consistency: %w", err)
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

// walState is what reading the WAL found.
type walState struct {
	// unapplied counts the normal entries past the database's consistent
	// index: each adds at most one revision when etcd applies it at start.
	unapplied int64
	// snapshot is the newest snapshot record, nil when there is none.
	snapshot *walpb.Snapshot
	// torn: the last record is cut short, as a killed member leaves it;
	// etcd repairs that, so it is no damage.
	torn bool
}

// readWAL decodes every record of every WAL file, checking their CRCs, and
// the entries after the newest snapshot record.
func readWAL(dir string, cindex uint64) (w walState, err error) {
	// etcd's WAL code panics on records it cannot unmarshal.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("wal %s: %v", dir, p)
		}
	}()
	lg := zap.NewNop()
	snaps, err := wal.ValidSnapshotEntries(lg, dir)
	if err != nil {
		return w, fmt.Errorf("wal %s: %w", dir, err)
	}
	from := &walpb.Snapshot{}
	if len(snaps) > 0 {
		from = snaps[len(snaps)-1]
		if from.GetIndex() > 0 {
			w.snapshot = from
		}
	}
	l, err := wal.OpenForRead(lg, dir, from)
	if err != nil {
		return w, fmt.Errorf("wal %s: %w", dir, err)
	}
	defer func() { _ = l.Close() }()
	_, _, ents, err := l.ReadAll()
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		w.torn = true
	case err != nil:
		return w, fmt.Errorf("wal %s: %w", dir, err)
	}
	for _, e := range ents {
		if e.GetIndex() > cindex && e.GetType() == raftpb.EntryNormal && len(e.GetData()) > 0 {
			w.unapplied++
		}
	}
	return w, nil
}

// checkSnaps loads every snap file (each carries a CRC) and checks that
// the WAL's newest snapshot record has its file, without which etcd cannot
// start. It returns the file at fault.
func checkSnaps(dir string, newest *walpb.Snapshot) (file string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("snap %s: %v", file, p)
		}
	}()
	names, err := filepath.Glob(filepath.Join(dir, "*.snap"))
	if err != nil {
		return dir, err
	}
	for _, name := range names {
		file = name
		if _, err := snap.Read(zap.NewNop(), name); err != nil {
			return name, fmt.Errorf("snap %s: %w", name, err)
		}
	}
	if newest != nil {
		want := filepath.Join(dir, fmt.Sprintf("%016x-%016x.snap", newest.GetTerm(), newest.GetIndex()))
		if _, err := os.Stat(want); err != nil {
			return want, fmt.Errorf("snap %s: the WAL's newest snapshot record (index %d) has no snap file: %w", want, newest.GetIndex(), err)
		}
	}
	return "", nil
}

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

// bbolt's meta page layout, after the 16-byte page header.
const (
	boltMagic      = 0xED0CDAED
	metaOffset     = 16
	metaPageSize   = metaOffset + 8  // magic, version, then the page size
	metaHighWater  = metaOffset + 40 // pgid: the pages in use
	metaTxID       = metaOffset + 48
	minMetaRead    = metaOffset + 64
	defaultBoltPge = 4096
)

// checkLength reads both meta pages and fails when the file is shorter
// than the newest valid one's high-water mark, or neither is valid.
func checkLength(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	var need, txid uint64
	valid := false
	pageSize := int64(defaultBoltPge)
	for i := range int64(2) {
		b := make([]byte, minMetaRead)
		if _, err := f.ReadAt(b, i*pageSize); err != nil {
			continue
		}
		if binary.LittleEndian.Uint32(b[metaOffset:]) != boltMagic {
			continue
		}
		if i == 0 {
			if ps := int64(binary.LittleEndian.Uint32(b[metaPageSize:])); ps >= 512 && ps <= 1<<16 {
				pageSize = ps
			}
		}
		if t := binary.LittleEndian.Uint64(b[metaTxID:]); !valid || t > txid {
			txid, need, valid = t, binary.LittleEndian.Uint64(b[metaHighWater:])*uint64(pageSize), true
		}
	}
	if !valid {
		return errors.New("neither meta page holds a bbolt header")
	}
	if uint64(info.Size()) < need {
		return fmt.Errorf("truncated: %d bytes, its meta page says %d are in use", info.Size(), need)
	}
	return nil
}

// bbolt's page layout: a 16-byte header (id uint64, flags uint16, count
// uint16, overflow uint32), then 16-byte elements.
const (
	pageHeaderSize = 16
	elementSize    = 16
	branchPage     = 0x01
	leafPage       = 0x02
	bucketLeafFlag = 0x01
	metaRoot       = metaOffset + 16 // the root bucket's page
)

// walkPages visits every page reachable from the newest meta page — the
// root bucket and each bucket's tree, inline buckets included — and checks
// that each names itself, has the type its parent expects, and points only
// at pages inside the file. Free pages hold stale data and are not read.
func walkPages(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	w := &walker{f: f, pageSize: defaultBoltPge, visited: map[uint64]bool{}}
	ps := make([]byte, 4)
	if _, err := f.ReadAt(ps, metaPageSize); err == nil {
		if v := int64(binary.LittleEndian.Uint32(ps)); v >= 512 && v <= 1<<16 {
			w.pageSize = v
		}
	}
	w.pages = uint64(info.Size() / w.pageSize)
	var root, txid uint64
	found := false
	for i := range int64(2) {
		b := make([]byte, minMetaRead)
		if _, err := f.ReadAt(b, i*w.pageSize); err != nil || binary.LittleEndian.Uint32(b[metaOffset:]) != boltMagic {
			continue
		}
		if t := binary.LittleEndian.Uint64(b[metaTxID:]); !found || t > txid {
			root, txid, found = binary.LittleEndian.Uint64(b[metaRoot:]), t, true
		}
	}
	if !found {
		return errors.New("neither meta page holds a bbolt header")
	}
	return w.page(root, 0)
}

type walker struct {
	f        *os.File
	pageSize int64
	pages    uint64
	visited  map[uint64]bool
}

func (w *walker) page(id uint64, depth int) error {
	if id < 2 || id >= w.pages {
		return fmt.Errorf("a page points at page %d, outside the file's %d pages", id, w.pages)
	}
	if w.visited[id] || depth > 64 {
		return fmt.Errorf("page %d is reached twice: the tree has a cycle", id)
	}
	w.visited[id] = true
	hdr := make([]byte, pageHeaderSize)
	if _, err := w.f.ReadAt(hdr, int64(id)*w.pageSize); err != nil {
		return fmt.Errorf("page %d: %w", id, err)
	}
	if got := binary.LittleEndian.Uint64(hdr); got != id {
		return fmt.Errorf("page %d names itself page %d", id, got)
	}
	overflow := uint64(binary.LittleEndian.Uint32(hdr[12:]))
	if id+overflow >= w.pages {
		return fmt.Errorf("page %d runs past the end of the file", id)
	}
	buf := make([]byte, int64(1+overflow)*w.pageSize)
	if _, err := w.f.ReadAt(buf, int64(id)*w.pageSize); err != nil {
		return fmt.Errorf("page %d: %w", id, err)
	}
	return w.node(id, buf, depth)
}

// node checks one branch or leaf page held in buf (a page of the file or
// an inline bucket's) and descends into what it points at.
func (w *walker) node(id uint64, buf []byte, depth int) error {
	flags := binary.LittleEndian.Uint16(buf[8:])
	count := int(binary.LittleEndian.Uint16(buf[10:]))
	if pageHeaderSize+count*elementSize > len(buf) {
		return fmt.Errorf("page %d: %d elements do not fit", id, count)
	}
	var prev []byte
	for i := range count {
		e := buf[pageHeaderSize+i*elementSize:]
		var key []byte
		var err error
		switch flags {
		case branchPage:
			pos, ksize := binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:])
			if key, err = slice(buf, pageHeaderSize+i*elementSize, pos, ksize); err != nil {
				return fmt.Errorf("page %d, element %d: %w", id, i, err)
			}
			if err := w.page(binary.LittleEndian.Uint64(e[8:]), depth+1); err != nil {
				return err
			}
		case leafPage:
			eflags, pos := binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:])
			ksize, vsize := binary.LittleEndian.Uint32(e[8:]), binary.LittleEndian.Uint32(e[12:])
			if key, err = slice(buf, pageHeaderSize+i*elementSize, pos, ksize); err != nil {
				return fmt.Errorf("page %d, element %d: %w", id, i, err)
			}
			if eflags&bucketLeafFlag != 0 {
				value, err := slice(buf, pageHeaderSize+i*elementSize, pos+ksize, vsize)
				if err != nil {
					return fmt.Errorf("page %d, element %d: bucket header: %w", id, i, err)
				}
				if len(value) < 16 {
					return fmt.Errorf("page %d, element %d: a bucket header of %d bytes", id, i, len(value))
				}
				if root := binary.LittleEndian.Uint64(value); root != 0 {
					err = w.page(root, depth+1)
				} else if len(value) > 16+pageHeaderSize {
					err = w.node(id, value[16:], depth+1)
				}
				if err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("page %d has type %#x where a branch or leaf page belongs", id, flags)
		}
		if prev != nil && string(key) <= string(prev) {
			return fmt.Errorf("page %d: keys out of order at element %d", id, i)
		}
		prev = key
	}
	return nil
}

// slice is the n bytes at pos past the element at elem, inside buf.
func slice(buf []byte, elem int, pos, n uint32) ([]byte, error) {
	start := uint64(elem) + uint64(pos)
	if end := start + uint64(n); end > uint64(len(buf)) {
		return nil, fmt.Errorf("element data %d-%d lies outside its page", start, end)
	}
	return buf[start : start+uint64(n)], nil
}
