package restore

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/storage/schema"

	"github.com/etcdkit/etcdkit/internal/datadir"
)

func residentFile(t *testing.T) int64 {
	t.Helper()
	n, err := datadir.ResidentFile()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A compaction's replay leaves the database's pages mapped; the replayer
// releases them under the backend's lock (where bbolt cannot remap), and
// the database reads the same after.
func TestCompactionReleasesTheMappedDatabase(t *testing.T) {
	r := openReplayer(filepath.Join(t.TempDir(), "db"), 1, 0, time.Time{}, 0)
	defer func() { _ = r.close() }()
	value := bytes.Repeat([]byte("v"), 64<<10)
	tx := r.b.BatchTx()
	tx.LockOutsideApply()
	tx.UnsafeCreateBucket(schema.Key)
	for i := range 512 { // 32 MiB
		tx.UnsafePut(schema.Key, fmt.Appendf(nil, "%08d", i), value)
	}
	tx.Unlock()
	r.b.ForceCommit()
	read := func() int {
		n := 0
		rt := r.b.ReadTx()
		rt.RLock()
		defer rt.RUnlock()
		_ = rt.UnsafeForEach(schema.Key, func(_, v []byte) error {
			if bytes.Equal(v, value) {
				n++
			}
			return nil
		})
		return n
	}
	if n := read(); n != 512 {
		t.Fatalf("%d of 512 values read back", n)
	}
	before := residentFile(t)
	tx.LockOutsideApply()
	_ = datadir.ReleaseMapped(filepath.Dir(r.path))
	tx.Unlock()
	after := residentFile(t)
	if before-after < 16<<20 {
		t.Fatalf("file-backed resident %d MiB before, %d MiB after: the database's pages were not released", before>>20, after>>20)
	}
	if n := read(); n != 512 {
		t.Fatalf("after the release, %d of 512 values read back", n)
	}
}
