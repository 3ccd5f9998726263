package restore

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

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
	r.b.Lock()
	for i := range 512 { // 32 MiB
		r.b.PutRevision(fmt.Appendf(nil, "%08d", i), value)
	}
	r.b.Unlock()
	r.b.Commit()
	read := func() int {
		n := 0
		r.b.ForEachRevision(func(_, v []byte) {
			if bytes.Equal(v, value) {
				n++
			}
		})
		r.b.Unlock()
		return n
	}
	if n := read(); n != 512 {
		t.Fatalf("%d of 512 values read back", n)
	}
	before := residentFile(t)
	// The replayer's own release, as a compaction's replay runs it.
	r.unmap = true
	r.b.Lock()
	r.release()
	after := residentFile(t)
	if before-after < 16<<20 {
		t.Fatalf("file-backed resident %d MiB before, %d MiB after: the database's pages were not released", before>>20, after>>20)
	}
	if n := read(); n != 512 {
		t.Fatalf("after the release, %d of 512 values read back", n)
	}
}
