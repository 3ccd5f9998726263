package restore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/pkg/v3/traceutil"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"
)

// compactCopy leaves what etcd's mvcc compaction at the head and its
// Defrag leave, key for key in every bucket, in no more room: keys put
// again and again, deleted, deleted and put again, in transactions.
func TestCompactCopyIsEtcdsCompactionAndDefrag(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	b := etcdBackend(src)
	lg := zap.NewNop()
	lessor := lease.NewLessor(lg, b, nil, lease.LessorConfig{MinLeaseTTL: 1})
	kv := mvcc.NewStore(lg, b, lessor, mvcc.StoreConfig{})
	rnd := rand.New(rand.NewPCG(7, 8))
	value := bytes.Repeat([]byte("v"), 5000)
	for i := range 6000 {
		w := kv.Write(traceutil.TODO())
		for j := range 1 + rnd.IntN(3) {
			key := fmt.Appendf(nil, "/k/%04d", rnd.IntN(1500))
			if rnd.IntN(5) == 0 {
				w.DeleteRange(key, nil)
			} else {
				w.Put(key, value[:rnd.IntN(len(value)-10)+i%7+j], 0)
			}
		}
		w.End()
	}
	head := kv.Rev()
	if err := kv.Close(); err != nil {
		t.Fatal(err)
	}
	lessor.Stop()
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
	eb := etcdBackend(theirs)
	theirLessor := lease.NewLessor(lg, eb, nil, lease.LessorConfig{MinLeaseTTL: 1})
	ekv := mvcc.NewStore(lg, eb, theirLessor, mvcc.StoreConfig{})
	done, err := ekv.Compact(traceutil.TODO(), head)
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if err := ekv.Close(); err != nil {
		t.Fatal(err)
	}
	theirLessor.Stop()
	if err := eb.Defrag(); err != nil {
		t.Fatal(err)
	}
	if err := eb.Close(); err != nil {
		t.Fatal(err)
	}

	ours := filepath.Join(dir, "ours.db")
	if err := compactCopy(context.Background(), src, ours, head, nil); err != nil {
		t.Fatal(err)
	}
	a, e := dump(t, ours), dump(t, theirs)
	if a != e {
		t.Fatalf("compacted databases differ:\nours   %.600s\netcd's %.600s", a, e)
	}
	oi, _ := os.Stat(ours)
	ti, _ := os.Stat(theirs)
	si, _ := os.Stat(src)
	t.Logf("source %d bytes, ours %d, etcd's %d; %d bytes of keys and values", si.Size(), oi.Size(), ti.Size(), len(a))
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
				fmt.Fprintf(&out, "%s/%x=%d:%x ", name, k, len(v), v[:min(len(v), 40)])
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

// etcdBackend opens a database with etcd's own backend, to write what
// compactCopy is compared with.
func etcdBackend(path string) backend.Backend {
	cfg := backend.DefaultBackendConfig(zap.NewNop())
	cfg.Path = path
	return backend.New(cfg)
}
