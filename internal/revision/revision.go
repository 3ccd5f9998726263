package revision

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	bucketKey  = []byte("key")
	bucketMeta = []byte("meta")
	metaKeys   = [][]byte{[]byte("finishedCompactRev"), []byte("scheduledCompactRev")}
)

// OfFile reads the revision of the database at path: the newest revision
// in the key bucket, raised to the compaction revisions (a compaction may
// have removed the newest revision's tombstones), and at least 1.
func OfFile(path string) (int64, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		return 0, fmt.Errorf("database %s: %w", path, err)
	}
	defer func() { _ = db.Close() }()
	var rev int64
	err = db.View(func(tx *bolt.Tx) (err error) {
		// bbolt trusts the pages it reads: a damaged one sends it out of
		// the file (an index out of range, a fault past its end). That is
		// a damaged database to report, not a crash of the restore.
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("damaged: reading it failed: %v", p)
			}
		}()
		rev, err = OfTx(tx)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("database %s: %w", path, err)
	}
	return rev, nil
}

// OfTx reads the revision inside a bbolt transaction, as OfFile does.
func OfTx(tx *bolt.Tx) (int64, error) {
	rev := int64(1)
	keys := tx.Bucket(bucketKey)
	if keys == nil {
		return 0, errors.New("no key bucket: not an etcd v3 database")
	}
	if k, _ := keys.Cursor().Last(); k != nil {
		r, err := Main(k)
		if err != nil {
			return 0, fmt.Errorf("key bucket: %w", err)
		}
		rev = max(rev, r)
	}
	if meta := tx.Bucket(bucketMeta); meta != nil {
		for _, name := range metaKeys {
			if v := meta.Get(name); v != nil {
				r, err := Main(v)
				if err != nil {
					return 0, fmt.Errorf("meta %s: %w", name, err)
				}
				rev = max(rev, r)
			}
		}
	}
	return rev, nil
}

// Main decodes etcd's revision bytes: 8 bytes big-endian main revision,
// '_', 8 bytes sub revision, and an optional tombstone mark.
func Main(b []byte) (int64, error) {
	if len(b) < 17 || b[8] != '_' {
		return 0, fmt.Errorf("%x is not a revision", b)
	}
	return int64(binary.BigEndian.Uint64(b[:8])), nil
}
