package withetcd_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/validate"
	"github.com/etcdkit/etcdkit/validate/internal/files"
)

// stopped is the data dir of a member stopped cleanly after a workload,
// and its revision.
func stopped(t *testing.T) (string, int64) {
	t.Helper()
	c := etcdtest.Start(t, etcdtest.Options{})
	res, err := (etcdtest.Workload{Ops: 300, Seed: 1, TxnPercent: 10, DeletePercent: 10}).Run(context.Background(), c.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	m := c.Members[0]
	m.Stop()
	return m.Dir, res.LastRevision
}

func check(t *testing.T, dir string, opts validate.Options, want validate.Verdict, file string) validate.Report {
	t.Helper()
	r, err := validate.DataDir(context.Background(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != want {
		t.Fatalf("verdict %s (%s), want %s", r.Verdict, r.Reason, want)
	}
	if file != "" && !strings.Contains(r.File, file) {
		t.Fatalf("the report names %q (%s), want %s", r.File, r.Reason, file)
	}
	return r
}

func TestSanityVerdicts(t *testing.T) {
	dir, rev := stopped(t)
	r := check(t, dir, validate.Options{}, validate.Valid, "")
	if r.Revision != rev {
		t.Fatalf("revision %d, want %d", r.Revision, rev)
	}
	full := check(t, dir, validate.Options{Mode: validate.Full}, validate.Valid, "")
	if len(full.Checks) == 0 || full.Checks[0].Took <= 0 {
		t.Fatalf("checks not timed: %+v", full.Checks)
	}

	check(t, t.TempDir(), validate.Options{}, validate.Empty, "member")
	check(t, dir, validate.Options{BackupRevision: rev + 10}, validate.Behind, "db")
	check(t, dir, validate.Options{BackupRevision: rev + 10, MultiMember: true}, validate.Valid, "")

	if err := validate.WriteGuard(dir, "m0", "etcdtest"); err != nil {
		t.Fatal(err)
	}
	check(t, dir, validate.Options{Name: "m0", Token: "etcdtest"}, validate.Valid, "")
	check(t, dir, validate.Options{Name: "m1", Token: "etcdtest"}, validate.WrongVolume, validate.GuardFile)
	check(t, dir, validate.Options{Name: "m0", Token: "other"}, validate.WrongVolume, validate.GuardFile)
}

func TestDamagedDataDirs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		file   string
	}{
		{"no wal", func(t *testing.T, dir string) { must(t, os.RemoveAll(filepath.Join(dir, "member", "wal"))) }, "wal"},
		{"no db", func(t *testing.T, dir string) { must(t, os.Remove(filepath.Join(dir, "member", "snap", "db"))) }, "db"},
		{"db truncated", func(t *testing.T, dir string) {
			must(t, os.Truncate(filepath.Join(dir, "member", "snap", "db"), 10000))
		}, "db"},
		{"meta pages", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, "member", "snap", "db"), 16, 4096+16)
		}, "db"},
		// bbolt follows a branch pointer into its mapping unchecked on the
		// way to the newest key, which sanity mode reads: one just past
		// the file's end lands in the mapping where no file backs it, and
		// the read faults.
		{"branch pointers", func(t *testing.T, dir string) {
			db := filepath.Join(dir, "member", "snap", "db")
			pages, err := files.Reachable(db)
			must(t, err)
			f, err := os.OpenFile(db, os.O_RDWR, 0)
			must(t, err)
			defer func() { _ = f.Close() }()
			info, err := f.Stat()
			must(t, err)
			past := binary.LittleEndian.AppendUint64(nil, uint64(info.Size()/4096+1))
			branches := 0
			for id, typ := range pages {
				if typ != 0x01 {
					continue
				}
				branches++
				hdr := make([]byte, 16)
				_, err := f.ReadAt(hdr, int64(id)*4096)
				must(t, err)
				last := int64(binary.LittleEndian.Uint16(hdr[10:])) - 1
				_, err = f.WriteAt(past, int64(id)*4096+16+last*16+8)
				must(t, err)
			}
			if branches == 0 {
				t.Fatal("the database has no branch page to damage")
			}
		}, "db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := stopped(t)
			tc.damage(t, dir)
			r := check(t, dir, validate.Options{}, validate.Corrupt, tc.file)
			t.Log(r.Reason)
		})
	}
}

func TestLockedWhileRunning(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	check(t, c.Members[0].Dir, validate.Options{}, validate.Locked, "db")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// flip inverts a byte at each offset of a file.
func flip(t *testing.T, path string, offsets ...int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	defer func() { _ = f.Close() }()
	for _, off := range offsets {
		b := make([]byte, 1)
		_, err := f.ReadAt(b, off)
		must(t, err)
		b[0] ^= 0xff
		_, err = f.WriteAt(b, off)
		must(t, err)
	}
}

// A data dir older than the backups' revision is Behind.
func TestBehindTheBackups(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t, etcdtest.Options{})
	m := c.Members[0]
	if _, err := (etcdtest.Workload{Ops: 100, Seed: 3}).Run(ctx, c.Client(t)); err != nil {
		t.Fatal(err)
	}
	m.Stop()
	old := filepath.Join(t.TempDir(), "old")
	must(t, os.CopyFS(old, os.DirFS(m.Dir)))
	m.Restart(t)
	cli := m.Client(t)
	res, err := (etcdtest.Workload{Ops: 50, Seed: 4}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	r := check(t, old, validate.Options{BackupRevision: res.LastRevision}, validate.Behind, "db")
	if r.BackupRevision != res.LastRevision || r.Revision >= r.BackupRevision {
		t.Fatalf("revision %d, backup %d (workload ended at %d)", r.Revision, r.BackupRevision, res.LastRevision)
	}
}

// etcd writes no freelist (NoFreelistSync), so there is no freelist page
// to damage: both meta pages say so. Damage to the newest meta page's
// freelist field fails that page's checksum, and bbolt, like etcd, falls
// back to the other meta page, whose tree is intact: the data dir is Valid.
func TestFreelistAndOneMetaPage(t *testing.T) {
	dir, _ := stopped(t)
	db := filepath.Join(dir, "member", "snap", "db")
	b, err := os.ReadFile(db)
	must(t, err)
	const freelist, txid = 16 + 32, 16 + 48
	newest := int64(0)
	for i := range int64(2) {
		if got := binary.LittleEndian.Uint64(b[i*4096+freelist:]); got != ^uint64(0) {
			t.Fatalf("meta page %d names freelist page %d; etcd writes none", i, got)
		}
		if binary.LittleEndian.Uint64(b[i*4096+txid:]) > binary.LittleEndian.Uint64(b[newest*4096+txid:]) {
			newest = i
		}
	}
	flip(t, db, newest*4096+freelist)
	for _, mode := range []validate.Mode{validate.Sanity, validate.Full} {
		check(t, dir, validate.Options{Mode: mode}, validate.Valid, "")
	}
}

// A data dir etcd 3.5 wrote (etcd-backup-restore 3.5.27 restored it, then
// stopped) holds WAL entries in their v2 form, which etcd 3.7 panics on at
// start, and its storage version is 3.7's (the full it restored was etcd
// 3.7's), which etcd 3.6 refuses: for either it is OtherVersion, a fact
// named with the release that starts on it, in both modes, though the
// database is sound; etcd 3.5 starts on it.
func TestEtcd35DataDirIsNamed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(dir, os.DirFS("../../testdata/etcd35")); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []validate.Mode{validate.Sanity, validate.Full} {
		r, err := validate.DataDir(context.Background(), dir, validate.Options{Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict != validate.OtherVersion || r.Release.V2Entries != 2 || r.Revision != 21 || r.Release.Written().MinorString() != "3.5" ||
			!strings.Contains(r.Reason, "etcd 3.5's data: its cluster version is 3.5, and etcd steps up one minor at a time; its WAL holds 2 entries from index 3 on in etcd 3.5's v2 form, which etcd 3.7 cannot apply: run etcd 3.5 on it") {
			t.Errorf("%s: %s %q (release %s, revision %d)", mode, r.Verdict, r.Reason, r.Release, r.Revision)
		}
		for e, want := range map[string]validate.Verdict{"3.5.35": validate.Valid, "3.6.16": validate.OtherVersion} {
			r, err := validate.DataDir(t.Context(), dir, validate.Options{Mode: mode, Etcd: etcdversion.MustParse(e)})
			if err != nil || r.Verdict != want {
				t.Errorf("%s, etcd %s: %s %q, %v; want %s", mode, e, r.Verdict, r.Reason, err, want)
			}
			t.Logf("%s, etcd %s: %s", mode, e, r.Reason)
		}
	}
}

// A member whose WAL lives in a dedicated wal-dir is Valid when the WAL
// dir is named, in sanity and full mode; a data dir that lost its member
// directory while the WAL dir kept a WAL is no empty member but damage.
func TestDedicatedWALDir(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{DedicatedWAL: true})
	if _, err := (etcdtest.Workload{Ops: 200, Seed: 3}).Run(context.Background(), c.Client(t)); err != nil {
		t.Fatal(err)
	}
	m := c.Members[0]
	m.Stop()
	if _, err := os.Stat(filepath.Join(m.Dir, "member", "wal")); !os.IsNotExist(err) {
		t.Fatalf("the data dir holds a WAL of its own: %v", err)
	}
	for _, mode := range []validate.Mode{validate.Sanity, validate.Full} {
		check(t, m.Dir, validate.Options{Mode: mode, WALDir: m.WALDir}, validate.Valid, "")
	}
	// Without the WAL dir, the data dir looks damaged: why it must be named.
	check(t, m.Dir, validate.Options{}, validate.Corrupt, "wal")
	if err := os.RemoveAll(filepath.Join(m.Dir, "member")); err != nil {
		t.Fatal(err)
	}
	r := check(t, m.Dir, validate.Options{WALDir: m.WALDir}, validate.Corrupt, m.WALDir)
	t.Log(r.Reason)
	if err := os.RemoveAll(m.WALDir); err != nil {
		t.Fatal(err)
	}
	check(t, m.Dir, validate.Options{WALDir: m.WALDir}, validate.Empty, "member")
}

// A member the cluster removed on purpose while it ran applied its own
// removal: its data dir names it in members_removed, and the verdict is
// Removed, in both modes; the members that stay are Valid. A data dir whose
// bucket cannot be read is Removed too (fail closed): whether the member
// was removed cannot be told.
//
// The member removed is the leader: it commits and applies its own removal
// before it steps down. A follower may instead stop when its peers refuse
// it, before the entry reaches it, and then its data dir cannot tell.
func TestRemovedMember(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3})
	if err := c.WaitLeader(t.Context()); err != nil {
		t.Fatal(err)
	}
	gone := c.Leader()
	if gone == nil {
		t.Fatal("no leader")
	}
	c.Remove(t, gone)
	for _, mode := range []validate.Mode{validate.Sanity, validate.Full} {
		r := check(t, gone.Dir, validate.Options{Mode: mode, MultiMember: true}, validate.Removed, "db")
		if !strings.Contains(r.Reason, "the cluster removed member") || !strings.Contains(r.Reason, "members_removed") {
			t.Errorf("%s: %q", mode, r.Reason)
		}
	}
	stays := c.Members[0]
	if stays == gone {
		stays = c.Members[1]
	}
	stays.Stop()
	check(t, stays.Dir, validate.Options{Mode: validate.Full, MultiMember: true}, validate.Valid, "")

	// The bucket gone: fail closed.
	db := filepath.Join(stays.Dir, "member", "snap", "db")
	b, err := bolt.Open(db, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("members_removed")) }); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	r := check(t, stays.Dir, validate.Options{MultiMember: true}, validate.Removed, "db")
	if !strings.Contains(r.Reason, "cannot be told") {
		t.Errorf("%q", r.Reason)
	}
}

// A database that is a FIFO is damage, named, not a check that waits for
// a writer forever.
func TestDatabaseFIFO(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(dir, os.DirFS("../../testdata/etcd35")); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "member", "snap", "db")
	if err := os.Remove(db); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(db, 0o600); err != nil {
		t.Fatal(err)
	}
	r := check(t, dir, validate.Options{Etcd: etcdversion.MustParse("3.5")}, validate.Corrupt, "db")
	if !strings.Contains(r.Reason, "not a regular file") {
		t.Fatalf("%q", r.Reason)
	}
}
