package files

import (
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// seedDB is a small bbolt file with nested, inline and large buckets.
func seedDB(f *testing.F) []byte {
	path := filepath.Join(f.TempDir(), "db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		f.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{"key", "meta", "tiny"} {
			b, err := tx.CreateBucketIfNotExists([]byte(name))
			if err != nil {
				return err
			}
			n := 300
			if name == "tiny" {
				n = 2
			}
			for i := range n {
				if err := b.Put([]byte{byte(i >> 8), byte(i), '_'}, make([]byte, 100+i%7*300)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	_ = db.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// The page walker reads damaged files without panicking: its errors are
// the verdict.
func FuzzWalkPages(f *testing.F) {
	f.Add(seedDB(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		_ = CheckLength(path)
		_ = WalkPages(path)
	})
}

// seedWAL is a WAL file with a few entries.
func seedWAL(f *testing.F) []byte {
	dir := filepath.Join(f.TempDir(), "wal")
	w, err := wal.Create(zap.NewNop(), dir, []byte("meta"))
	if err != nil {
		f.Fatal(err)
	}
	var ents []*raftpb.Entry
	for i := uint64(1); i <= 20; i++ {
		idx, term, typ := i, uint64(1), raftpb.EntryNormal
		ents = append(ents, &raftpb.Entry{Index: &idx, Term: &term, Type: &typ, Data: []byte("entry")})
	}
	if err := w.Save(&raftpb.HardState{}, ents); err != nil {
		f.Fatal(err)
	}
	_ = w.Close()
	names, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	b, err := os.ReadFile(names[0])
	if err != nil {
		f.Fatal(err)
	}
	// The preallocated zeros add nothing to fuzz.
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// The WAL reader turns any damage into an error, never a panic.
func FuzzReadWAL(f *testing.F) {
	f.Add(seedWAL(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "0000000000000000-0000000000000000.wal"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _ = ReadWAL(dir, 0)
	})
}
