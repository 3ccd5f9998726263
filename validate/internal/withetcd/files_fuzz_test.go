package withetcd_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcdkit/etcdkit/validate/internal/files"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// seedDB is a small bbolt file with a branch page, an overflow page and
// an inline bucket, cut to its high-water mark: the fuzzer's speed falls
// with the input's size.
func seedDB(f *testing.F) []byte {
	path := filepath.Join(f.TempDir(), "db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		f.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for name, n := range map[string]int{"key": 60, "meta": 1, "tiny": 2} {
			b, err := tx.CreateBucketIfNotExists([]byte(name))
			if err != nil {
				return err
			}
			for i := range n {
				if err := b.Put([]byte{byte(i >> 8), byte(i), '_'}, make([]byte, 60+i%7*30)); err != nil {
					return err
				}
			}
		}
		return tx.Bucket([]byte("meta")).Put([]byte("big"), make([]byte, 5000))
	})
	if err != nil {
		f.Fatal(err)
	}
	_ = db.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	pages, err := files.Reachable(path)
	if err != nil {
		f.Fatal(err)
	}
	var end uint64
	for id := range pages {
		end = max(end, id+3)
	}
	return b[:min(uint64(len(b)), end*4096)] // bbolt's default page size, which the seed database has
}

// The page walker reads damaged files without panicking: its errors are
// the verdict.
func FuzzWalkPages(f *testing.F) {
	f.Add(seedDB(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = files.Walk(b)
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
		for _, last := range []bool{true, false} {
			_ = files.DecodeWAL(bytes.NewReader(b), int64(len(b)), last)
		}
	})
}
