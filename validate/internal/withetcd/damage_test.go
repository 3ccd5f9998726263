package withetcd_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/validate"
	"github.com/etcdkit/etcdkit/validate/internal/files"
)

// withSnaps is a cleanly stopped member's data dir with snap files: it
// snapshots every 50 entries.
func withSnaps(t *testing.T) string {
	t.Helper()
	c := etcdtest.Start(t, etcdtest.Options{SnapshotCount: 50})
	if _, err := (etcdtest.Workload{Ops: 300, Seed: 2}).Run(context.Background(), c.Client(t)); err != nil {
		t.Fatal(err)
	}
	m := c.Members[0]
	m.Stop()
	return m.Dir
}

func glob(t *testing.T, pattern string) []string {
	t.Helper()
	names, err := filepath.Glob(pattern)
	if err != nil || len(names) == 0 {
		t.Fatalf("no %s: %v", pattern, err)
	}
	slices.Sort(names)
	return names
}

// pageOf finds a page of the database's trees with the given bbolt page
// flag (0x01 branch, 0x02 leaf): a free page holds stale data, and damage
// there rightly goes unnoticed.
func pageOf(t *testing.T, db string, flag uint16) int64 {
	t.Helper()
	pages, err := files.Reachable(db)
	if err != nil {
		t.Fatal(err)
	}
	ids := slices.Sorted(maps.Keys(pages))
	for _, id := range ids {
		if pages[id] == flag {
			return int64(id) * 4096
		}
	}
	t.Fatalf("no reachable page with flag %#x in %s", flag, db)
	return 0
}

func TestDamagedWALAndSnapsAndPages(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   validate.Mode
		damage func(t *testing.T, dir string)
		want   validate.Verdict
		file   string
	}{
		{"wal crc", validate.Sanity, func(t *testing.T, dir string) {
			flip(t, glob(t, filepath.Join(dir, "member", "wal", "*.wal"))[0], 600)
		}, validate.Corrupt, "wal"},
		{"wal torn mid-record", validate.Sanity, func(t *testing.T, dir string) {
			wals := glob(t, filepath.Join(dir, "member", "wal", "*.wal"))
			must(t, os.Truncate(wals[len(wals)-1], 3001))
		}, validate.Valid, ""},
		{"snap deleted", validate.Full, func(t *testing.T, dir string) {
			snaps := glob(t, filepath.Join(dir, "member", "snap", "*.snap"))
			must(t, os.Remove(snaps[len(snaps)-1]))
		}, validate.Corrupt, ".snap"},
		{"snap flipped", validate.Full, func(t *testing.T, dir string) {
			snaps := glob(t, filepath.Join(dir, "member", "snap", "*.snap"))
			flip(t, snaps[len(snaps)-1], 40)
		}, validate.Corrupt, ".snap"},
		{"leaf page", validate.Full, func(t *testing.T, dir string) {
			db := filepath.Join(dir, "member", "snap", "db")
			flip(t, db, pageOf(t, db, 0x02)+8)
		}, validate.Corrupt, "db"},
		{"branch page", validate.Full, func(t *testing.T, dir string) {
			db := filepath.Join(dir, "member", "snap", "db")
			flip(t, db, pageOf(t, db, 0x01)+8)
		}, validate.Corrupt, "db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := withSnaps(t)
			check(t, dir, validate.Options{Mode: validate.Full}, validate.Valid, "")
			tc.damage(t, dir)
			r := check(t, dir, validate.Options{Mode: tc.mode}, tc.want, tc.file)
			t.Log(r.Reason)
		})
	}
}
