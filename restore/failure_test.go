package restore_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/chaintest"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// oldDataDir is a data dir a restore must leave alone when it fails.
func oldDataDir(t *testing.T) (string, func()) {
	t.Helper()
	parent := t.TempDir()
	dir := filepath.Join(parent, "data")
	if err := os.MkdirAll(filepath.Join(dir, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "member", "old")
	if err := os.WriteFile(marker, []byte("old data"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, func() {
		t.Helper()
		if b, err := os.ReadFile(marker); err != nil || string(b) != "old data" {
			t.Fatalf("the old data dir was touched: %v", err)
		}
		entries, _ := os.ReadDir(parent)
		if len(entries) != 1 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Fatalf("left beside the data dir: %v", names)
		}
	}
}

func objectKeys(t *testing.T, st store.Store) []string {
	t.Helper()
	objs, err := st.List(context.Background(), "v2/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}

func rewrite(t *testing.T, st store.Store, key string, f func([]byte) []byte) {
	t.Helper()
	rc, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	_ = rc.Close()
	// Objects are written once: damage replaces one as bit rot would.
	if err := st.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), key, bytes.NewReader(f(b))); err != nil {
		t.Fatal(err)
	}
}

func TestFailedRestoresLeaveTheOldDataDir(t *testing.T) {
	x, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := age.GenerateX25519Identity()
	encrypted := snapshot.Codec{Compression: snapshot.Gzip, Recipients: []age.Recipient{x.Recipient()}}

	for _, tc := range []struct {
		name   string
		codec  snapshot.Codec
		damage func(t *testing.T, st *store.File, keys []string)
		read   snapshot.Codec
		want   string
	}{
		{
			name: "gap in the chain",
			damage: func(t *testing.T, st *store.File, keys []string) {
				if err := st.Delete(context.Background(), keys[1]); err != nil {
					t.Fatal(err)
				}
			},
			want: "misses revisions",
		},
		{
			name: "corrupt delta",
			damage: func(t *testing.T, st *store.File, keys []string) {
				rewrite(t, st, keys[2], func(b []byte) []byte { b[len(b)/2] ^= 0x20; return b })
			},
			want: "SHA-256 trailer does not match",
		},
		{
			name: "truncated full",
			damage: func(t *testing.T, st *store.File, keys []string) {
				rewrite(t, st, keys[0], func(b []byte) []byte { return b[:len(b)/2] })
			},
			want: "v2/Full-",
		},
		{
			// A delta's bytes under a later delta's name: whole and
			// summed, its events end before its name does.
			name: "delta short of its name",
			damage: func(t *testing.T, st *store.File, keys []string) {
				last, err := snapshot.Parse(keys[len(keys)-1])
				if err != nil {
					t.Fatal(err)
				}
				rc, err := st.Get(context.Background(), keys[1])
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = rc.Close() }()
				next := snapshot.NewDelta(last.LastRevision+1, last.LastRevision+1, time.Now(), snapshot.Codec{})
				if err := st.Put(context.Background(), next.Key, rc); err != nil {
					t.Fatal(err)
				}
			},
			want: "its events end at revision",
		},
		{name: "wrong key", codec: encrypted, read: snapshot.Codec{Identities: []age.Identity{other}}, want: "decrypt"},
		{name: "no key", codec: encrypted, want: "no identity was given"},
		{
			name: "disk too small",
			damage: func(t *testing.T, st *store.File, keys []string) {
				// A full snapshot a terabyte long, sparse on disk.
				f, err := os.Create(filepath.Join(storeDir(st), "v2", "Full-00000000-99999999-1900000000"))
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Truncate(1 << 40); err != nil {
					t.Fatal(err)
				}
				_ = f.Close()
			},
			want: "not enough free disk space",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := chaintest.BackedUp(t, tc.codec)
			if tc.damage != nil {
				tc.damage(t, st, objectKeys(t, st))
			}
			dir, intact := oldDataDir(t)
			_, err := restore.Restore(context.Background(), st, restore.Options{Read: restore.ReadOptions{Codec: tc.read}, Member: member.Spec{DataDir: dir}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
			intact()
		})
	}
}

func storeDir(st *store.File) string {
	return strings.TrimPrefix(st.String(), "file://")
}

func TestCancelledRestoreLeavesTheOldDataDir(t *testing.T) {
	st, _ := chaintest.BackedUp(t, snapshot.Codec{})
	dir, intact := oldDataDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	var once bool
	_, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: dir}, Read: restore.ReadOptions{
		// Cancelled as soon as the replay has begun.
		Progress: func(p restore.Progress) {
			if !once && p.BytesDownloaded > 0 {
				once = true
				cancel()
			}
		},
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	intact()
}

func TestRestoreMovesTheOldDataDirAside(t *testing.T) {
	st, _ := chaintest.BackedUp(t, snapshot.Codec{})
	dir, _ := oldDataDir(t)
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	res, err := restore.Restore(context.Background(), st, restore.Options{Member: member.Spec{DataDir: dir}, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	if res.MovedAside != dir+".bak-20261129T120000Z" {
		t.Fatalf("moved aside to %q", res.MovedAside)
	}
	if b, err := os.ReadFile(filepath.Join(res.MovedAside, "member", "old")); err != nil || string(b) != "old data" {
		t.Fatalf("the old data dir did not survive: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "member", "snap", "db")); err != nil {
		t.Fatalf("no restored database: %v", err)
	}
	// Restored again and again (--keep-moved-aside 1): the dirs restores
	// built are pruned to the newest, the original, which no restore
	// wrote, is never removed.
	for i := range 3 {
		at = at.Add(time.Minute)
		if res, err = restore.Restore(context.Background(), st, restore.Options{Member: member.Spec{DataDir: dir}, KeepMovedAside: 1, Now: func() time.Time { return at }}); err != nil {
			t.Fatal(err)
		}
		aside, _ := filepath.Glob(dir + ".bak-*")
		if want := []string{dir + ".bak-20261129T120000Z", res.MovedAside}; !slices.Equal(aside, want) {
			t.Fatalf("restore %d: moved-aside dirs %v, want %v", i+2, aside, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir+".bak-20261129T120000Z", "member", "old")); err != nil || string(b) != "old data" {
		t.Fatalf("the original data dir did not survive the restores: %v", err)
	}
}

// A plain full snapshot alone on the file store is damaged: a flipped
// bit, or a branch page of the key bucket pointing back at itself. Either
// fails the restore as damage; the loop must not send bbolt round it,
// allocating without end, before the trailer is checked.
func TestPlainFullAloneDamaged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := m.Client(t)
	if _, err := (etcdtest.Workload{Ops: 100, Seed: 40}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		damage func(*testing.T, []byte) []byte
	}{
		{"flipped bit", func(_ *testing.T, b []byte) []byte { b[len(b)/3] ^= 0x08; return b }},
		{"loop of pages", loopOfPages},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := store.NewFile(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			full, err := capture.Full(ctx, cli, st, snapshot.FullOptions{SpoolDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			res, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: filepath.Join(t.TempDir(), "data")}})
			if err != nil || res.Revision != full.LastRevision {
				t.Fatalf("restore of the full alone: %+v, %v", res, err)
			}
			rewrite(t, st, full.Key, func(b []byte) []byte { return tc.damage(t, b) })
			dir, intact := oldDataDir(t)
			stop := heapWatchdog(2 << 30)
			_, err = restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: dir}})
			stop()
			if !restore.Damaged(err) || !errors.Is(err, snapshot.ErrChecksum) || !strings.Contains(err.Error(), "an older chain") {
				t.Fatalf("a damaged full alone: %v", err)
			}
			intact()
		})
	}
}

// A compressed full whose blocks decode on every core, damaged, is damage
// to a restore: it fails with the way out (or turns to another site), and
// the old data dir stays.
func TestCompressedFullAloneDamaged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := m.Client(t)
	if _, err := (etcdtest.Workload{Ops: 3000, Seed: 41, ValueSize: 2048}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	for _, c := range []snapshot.Compression{snapshot.Gzip, snapshot.Zstd} {
		for name, damage := range map[string]func([]byte) []byte{
			"flipped byte": func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b },
			"last byte":    func(b []byte) []byte { b[len(b)-1] ^= 0x40; return b },
			"byte after":   func(b []byte) []byte { return append(b, 0x1f) },
		} {
			t.Run(string(c)+" "+name, func(t *testing.T) {
				st, err := store.NewFile(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				if _, err := capture.Full(ctx, cli, st, snapshot.FullOptions{SpoolDir: t.TempDir(), Codec: snapshot.Codec{Compression: c}}); err != nil {
					t.Fatal(err)
				}
				cat, err := snapshot.List(ctx, st)
				if err != nil || len(cat.Snapshots) != 1 {
					t.Fatalf("list: %v, %v", cat, err)
				}
				rewrite(t, st, cat.Snapshots[0].Key, damage)
				dir, intact := oldDataDir(t)
				_, err = restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: dir}})
				if !restore.Damaged(err) || !strings.Contains(err.Error(), "move it out of the store") {
					t.Fatalf("a damaged %s full: %v", c, err)
				}
				intact()
			})
		}
	}
}

// loopOfPages points the last child of the database's first branch page
// (bbolt's pages of 4 KiB: id, flags, count; branch elements of 16
// bytes, the child's id last) back at the page itself.
func loopOfPages(t *testing.T, b []byte) []byte {
	t.Helper()
	const pageSize, branch = 4096, 0x01
	for id := range len(b) / pageSize {
		p := b[id*pageSize:]
		count := int(binary.LittleEndian.Uint16(p[10:]))
		if binary.LittleEndian.Uint64(p) != uint64(id) || binary.LittleEndian.Uint16(p[8:]) != branch || count == 0 {
			continue
		}
		binary.LittleEndian.PutUint64(p[16+(count-1)*16+8:], uint64(id))
		return b
	}
	t.Fatal("the database has no branch page to damage: write more keys")
	return nil
}

// heapWatchdog ends the test binary with a message once the heap passes
// limit: a restore that allocates without bound would otherwise take the
// machine's memory, and the kernel would kill whichever process it picks.
// The returned func stops it.
func heapWatchdog(limit uint64) (stop func()) {
	done := make(chan struct{})
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if metrics.Read(sample); sample[0].Value.Uint64() > limit {
				panic(fmt.Sprintf("the heap passed %d bytes: something allocates without bound", limit))
			}
		}
	}()
	return func() { close(done) }
}

// A restored data dir that etcd has since written to may hold writes no
// backup has: once moved aside it is kept (a key written, or only a user
// added, which no key revision shows), while the restored dirs etcd never
// ran on are pruned.
func TestARestoredDirEtcdWroteToIsKept(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	if _, err := (etcdtest.Workload{Ops: 50, Seed: 41}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	st, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := capture.Full(ctx, cli, st, snapshot.FullOptions{SpoolDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	m := c.Members[0]
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	again := func() string {
		t.Helper()
		at = at.Add(time.Minute)
		res, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: m.Dir, Name: m.Name, PeerURLs: []string{m.PeerURL.String()}, Token: "etcdtest"}, KeepMovedAside: 1, Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		return res.MovedAside
	}
	m.Stop()
	original := again()
	m.Restart(t)
	if _, err := m.Client(t).Put(ctx, "only-here", "a write after the restore"); err != nil {
		t.Fatal(err)
	}
	m.Stop()
	written := again()
	// A user added changes no key's revision: the dir etcd ran on is
	// kept all the same.
	m.Restart(t)
	if _, err := m.Client(t).UserAdd(ctx, "only-here", "secret"); err != nil {
		t.Fatal(err)
	}
	m.Stop()
	usersOnly := again()
	unwritten := again()
	just := again()
	aside, _ := filepath.Glob(m.Dir + ".bak-*")
	if want := []string{original, written, usersOnly, just}; !slices.Equal(aside, want) {
		t.Fatalf("moved-aside dirs %v, want %v (%s, which etcd never wrote to, pruned)", aside, want, unwritten)
	}
}

// A member that does not fit its initial cluster (another peer URL,
// another name) is refused in our words before anything is downloaded,
// and no data dir is made.
func TestAMemberOutsideItsInitialClusterIsRefusedFirst(t *testing.T) {
	st, _ := chaintest.BackedUp(t, snapshot.Codec{})
	for _, tc := range []struct{ name, peer, want string }{
		{"m1", "http://localhost:2380", "give the same URLs to both"},
		{"m2", "http://127.0.0.1:2380", "has no member named m2"},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		_, err := restore.Restore(context.Background(), st, restore.Options{Member: member.Spec{DataDir: dir, Name: tc.name, PeerURLs: []string{tc.peer}, InitialCluster: "m1=http://127.0.0.1:2380"}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s at %s: %v, want %q", tc.name, tc.peer, err, tc.want)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the refused restore left %s: %v", dir, err)
		}
	}
}
