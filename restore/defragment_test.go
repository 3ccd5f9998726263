package restore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/server/v3/storage/schema"
)

// defragment leaves what etcd's Defrag leaves, key for key in every bucket,
// in no more room.
func TestDefragmentIsEtcds(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	b := openBackend(src)
	tx := b.BatchTx()
	tx.LockOutsideApply()
	tx.UnsafeCreateBucket(schema.Key)
	tx.UnsafeCreateBucket(schema.Meta)
	value := bytes.Repeat([]byte("v"), 3000)
	for i := range 20000 {
		tx.UnsafePut(schema.Key, fmt.Appendf(nil, "%08d", i), value[:i%3000])
	}
	tx.UnsafePut(schema.Meta, []byte("consistent_index"), []byte{0, 0, 0, 0, 0, 0, 0, 7})
	tx.Unlock()
	b.ForceCommit()
	// Holes, as an mvcc compaction leaves them.
	tx.LockOutsideApply()
	for i := 0; i < 20000; i += 3 {
		tx.UnsafeDelete(schema.Key, fmt.Appendf(nil, "%08d", i))
	}
	tx.Unlock()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(dir, "theirs.db")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(theirs, data, 0o600); err != nil {
		t.Fatal(err)
	}
	eb := openBackend(theirs)
	if err := eb.Defrag(); err != nil {
		t.Fatal(err)
	}
	if err := eb.Close(); err != nil {
		t.Fatal(err)
	}
	ours := filepath.Join(dir, "ours.db")
	if err := defragment(context.Background(), src, ours); err != nil {
		t.Fatal(err)
	}
	if a, b := dump(t, ours), dump(t, theirs); a != b {
		t.Fatalf("defragmented databases differ:\nours %.300s\netcd's %.300s", a, b)
	}
	oi, _ := os.Stat(ours)
	ti, _ := os.Stat(theirs)
	si, _ := os.Stat(src)
	t.Logf("source %d bytes, ours %d, etcd's %d", si.Size(), oi.Size(), ti.Size())
	if oi.Size() > ti.Size()*21/20 {
		t.Fatalf("ours is %d bytes, etcd's %d", oi.Size(), ti.Size())
	}
}

// dump is every bucket's keys and the digest of their values.
func dump(t *testing.T, path string) string {
	t.Helper()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	var out bytes.Buffer
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			n := 0
			err := b.ForEach(func(k, v []byte) error {
				n++
				fmt.Fprintf(&out, "%s/%s=%d:%x ", name, k, len(v), v[:min(len(v), 4)])
				return nil
			})
			fmt.Fprintf(&out, "[%s: %d keys]\n", name, n)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String()
}
