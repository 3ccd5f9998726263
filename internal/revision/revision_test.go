package revision

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A damaged database is an error, never a crash: a branch page's last
// element is pointed far past the file, as a flipped bit in a full
// snapshot did once, and reading the revision fails with the file named.
func TestOfFileReportsADamagedPageAsAnError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 100)
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucketKey)
		if err != nil {
			return err
		}
		for i := range 5000 {
			k := make([]byte, 17)
			binary.BigEndian.PutUint64(k, uint64(i+1))
			k[8] = '_'
			if err := b.Put(k, value); err != nil {
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
	if rev, err := OfFile(path); err != nil || rev != 5000 {
		t.Fatalf("intact: %d, %v", rev, err)
	}
	intact, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const pageSize = 4096
	damaged := 0
	for page := 2; page*pageSize < len(intact); page++ { // past the two meta pages
		head := intact[page*pageSize:]
		flags, count := binary.LittleEndian.Uint16(head[8:]), int(binary.LittleEndian.Uint16(head[10:]))
		if flags&0x01 == 0 || count == 0 { // not a branch page
			continue
		}
		b := append([]byte(nil), intact...)
		// The last element's page id: where a cursor's Last goes.
		binary.LittleEndian.PutUint64(b[page*pageSize+16+(count-1)*16+8:], 0x3fff3fff013b0133)
		p := filepath.Join(dir, fmt.Sprintf("damaged-%d", page))
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := OfFile(p); err != nil {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("page %d: %v does not name the file", page, err)
			}
			damaged++
		}
		_ = os.Remove(p)
	}
	if damaged == 0 {
		t.Fatal("no damaged page was noticed: the test damages nothing bbolt reads")
	}
}
