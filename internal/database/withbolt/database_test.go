package withbolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"github.com/etcdkit/etcdkit/internal/database"
)

// Databases of each page size bbolt writes, with small and large trees,
// values that overflow their page, inline and nested buckets: the reader
// walks every bucket's keys in both directions and finds each key exactly
// as bbolt does.
func TestReaderAgreesWithBbolt(t *testing.T) {
	for _, c := range []struct {
		pageSize, keys, maxValue int
	}{
		{4096, 0, 10},
		{4096, 1, 10},
		{4096, 3000, 100},
		{4096, 400, 20000},
		{16384, 4000, 300},
		{65536, 2000, 400},
	} {
		t.Run(fmt.Sprintf("page%d-keys%d-value%d", c.pageSize, c.keys, c.maxValue), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db")
			rng := rand.New(rand.NewPCG(uint64(c.keys), uint64(c.pageSize)))
			db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: c.pageSize})
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("big"))
				if err != nil {
					return err
				}
				for range c.keys {
					k := make([]byte, 1+rng.IntN(40))
					for i := range k {
						k[i] = byte(rng.IntN(256))
					}
					v := make([]byte, rng.IntN(c.maxValue+1))
					for i := range v {
						v[i] = byte(rng.IntN(256))
					}
					if err := b.Put(k, v); err != nil {
						return err
					}
				}
				// A small bucket bbolt keeps inline in its parent, and
				// a nested one the cursors skip.
				small, err := tx.CreateBucket([]byte("small"))
				if err != nil {
					return err
				}
				for i := range 3 {
					if err := small.Put([]byte{byte('a' + i)}, []byte{byte(i)}); err != nil {
						return err
					}
				}
				if _, err := b.CreateBucket([]byte("nested")); err != nil {
					return err
				}
				_, err = tx.CreateBucket([]byte("empty"))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string][][2][]byte{}
			if err := db.View(func(tx *bolt.Tx) error {
				return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
					return b.ForEach(func(k, v []byte) error {
						if v != nil {
							want[string(name)] = append(want[string(name)], [2][]byte{bytes.Clone(k), bytes.Clone(v)})
						}
						return nil
					})
				})
			}); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			r, err := database.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = r.Close() }()
			for _, name := range []string{"big", "small", "empty"} {
				b, err := r.Bucket([]byte(name))
				if err != nil || b == nil {
					t.Fatalf("bucket %s: %v, %v", name, b, err)
				}
				var forward, backward [][2][]byte
				c := b.Cursor()
				for k, v, err := c.First(); k != nil || err != nil; k, v, err = c.Next() {
					if err != nil {
						t.Fatal(err)
					}
					forward = append(forward, [2][]byte{k, v})
				}
				for k, v, err := c.Last(); k != nil || err != nil; k, v, err = c.Prev() {
					if err != nil {
						t.Fatal(err)
					}
					backward = append([][2][]byte{{k, v}}, backward...)
				}
				for _, got := range [][][2][]byte{forward, backward} {
					if len(got) != len(want[name]) {
						t.Fatalf("bucket %s: %d keys, bbolt reads %d", name, len(got), len(want[name]))
					}
					for i := range got {
						if !bytes.Equal(got[i][0], want[name][i][0]) || !bytes.Equal(got[i][1], want[name][i][1]) {
							t.Fatalf("bucket %s: key %d is %x, bbolt reads %x", name, i, got[i][0], want[name][i][0])
						}
					}
				}
				has := map[string]bool{}
				for _, kv := range want[name] {
					has[string(kv[0])] = true
				}
				for _, kv := range want[name] {
					v, err := b.Get(kv[0])
					if err != nil || !bytes.Equal(v, kv[1]) {
						t.Fatalf("bucket %s: get %x: %d bytes, %v", name, kv[0], len(v), err)
					}
					lacks := append(bytes.Clone(kv[0]), 0)
					if has[string(lacks)] {
						continue
					}
					if v, err := b.Get(lacks); err != nil || v != nil {
						t.Fatalf("bucket %s: get of a key it lacks, %x0: %x, %v (%d keys)", name, kv[0], v, err, len(want[name]))
					}
				}
			}
			if b, err := r.Bucket([]byte("none")); b != nil || err != nil {
				t.Fatalf("a bucket it lacks: %v, %v", b, err)
			}
		})
	}
}

// The revision is what etcd's mvcc store starts at: the key bucket's
// newest, raised to the compaction revisions, on etcd 3.5's own database.
func TestRevisionOfEtcdsDatabase(t *testing.T) {
	rev, err := database.Revision("../../../validate/testdata/etcd35/member/snap/db")
	if err != nil || rev != 21 {
		t.Fatalf("%d, %v", rev, err)
	}
	path := filepath.Join(t.TempDir(), "db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		keys, err := tx.CreateBucket([]byte("key"))
		if err != nil {
			return err
		}
		if err := keys.Put(revisionKey(40, false), []byte{}); err != nil {
			return err
		}
		meta, err := tx.CreateBucket([]byte("meta"))
		if err != nil {
			return err
		}
		return meta.Put([]byte("finishedCompactRev"), revisionKey(55, false))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if rev, err := database.Revision(path); err != nil || rev != 55 {
		t.Fatalf("compacted past the newest key: %d, %v", rev, err)
	}
}

// A file that holds a bucket's key but no key bucket, an empty file and
// a file of another format are errors that name the file.
func TestNotADatabase(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	text := filepath.Join(dir, "text")
	_ = os.WriteFile(empty, nil, 0o600)
	_ = os.WriteFile(text, bytes.Repeat([]byte("not a database "), 1000), 0o600)
	noKeys := filepath.Join(dir, "nokeys")
	db, err := bolt.Open(noKeys, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	for path, want := range map[string]string{empty: "empty", text: "not bbolt's", noKeys: "no key bucket"} {
		_, err := database.Revision(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", path, err)
		}
	}
}

// A database a running process holds open for writing is refused, not
// read while it changes.
func TestOpenRefusesADatabaseInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if _, err := database.Open(path); err == nil || !strings.Contains(err.Error(), "running etcd") {
		t.Fatalf("%v", err)
	}
}

// A damaged database is an error, never a crash: each branch page's last
// element in turn is pointed far past the file, as a flipped bit in a
// full snapshot did once, and reading the revision fails with the file
// named; so does every byte of a page header flipped in turn.
func TestDamagedPagesAreErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 100)
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("key"))
		if err != nil {
			return err
		}
		for i := range 5000 {
			if err := b.Put(revisionKey(int64(i+1), false), value); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if rev, err := database.Revision(path); err != nil || rev != 5000 {
		t.Fatalf("intact: %d, %v", rev, err)
	}
	intact, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const pageSize = 4096
	damaged := 0
	p := filepath.Join(dir, "damaged")
	if err := os.WriteFile(p, intact, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	// try writes b at off, reads the revision, and puts the bytes back.
	try := func(what string, off int, b []byte) {
		if _, err := f.WriteAt(b, int64(off)); err != nil {
			t.Fatal(err)
		}
		if _, err := database.Revision(p); err != nil {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("%s: %v does not name the file", what, err)
			}
			damaged++
		}
		if _, err := f.WriteAt(intact[off:off+len(b)], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	for page := 2; page*pageSize < len(intact); page++ {
		head := intact[page*pageSize:]
		flags, count := binary.LittleEndian.Uint16(head[8:]), int(binary.LittleEndian.Uint16(head[10:]))
		if flags&0x01 != 0 && count > 0 { // a branch page
			far := binary.LittleEndian.AppendUint64(nil, 0x3fff3fff013b0133)
			try(fmt.Sprintf("page %d's last child", page), page*pageSize+16+(count-1)*16+8, far)
		}
		// The header and the first element: what every walk reads.
		for i := range 16 + 16*min(count, 1) {
			try(fmt.Sprintf("page %d byte %d", page, i), page*pageSize+i, []byte{head[i] ^ 0xff})
		}
	}
	if damaged == 0 {
		t.Fatal("no damaged page was noticed: the test damages nothing the reader reads")
	}
}

// The key bucket's values decode as etcd's protobuf does.
func TestDecodeKeyValue(t *testing.T) {
	for _, kv := range []*mvccpb.KeyValue{
		{},
		{Key: []byte("k"), Value: []byte("v"), CreateRevision: 3, ModRevision: 1 << 40, Version: 7, Lease: -1 & 0x7fffffffffffffff},
		{Key: []byte("only")},
		{Key: bytes.Repeat([]byte("x"), 300), Value: bytes.Repeat([]byte("y"), 70000), Lease: 5},
	} {
		b, err := proto.Marshal(kv)
		if err != nil {
			t.Fatal(err)
		}
		got, err := database.DecodeKeyValue(b)
		if err != nil || !bytes.Equal(got.Key, kv.Key) || !bytes.Equal(got.Value, kv.Value) || got.CreateRevision != kv.CreateRevision ||
			got.ModRevision != kv.ModRevision || got.Version != kv.Version || got.Lease != kv.Lease {
			t.Errorf("%v: %+v, %v", kv, got, err)
		}
		if len(b) > 0 {
			if _, err := database.DecodeKeyValue(b[:len(b)-1]); err == nil && len(kv.Value) > 0 {
				t.Errorf("%v: a truncated value decodes", kv)
			}
		}
	}
}

func revisionKey(main int64, tombstone bool) []byte {
	k := make([]byte, 17, 18)
	binary.BigEndian.PutUint64(k, uint64(main))
	k[8] = '_'
	if tombstone {
		k = append(k, 't')
	}
	return k
}
