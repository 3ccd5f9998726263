package database

import (
	"encoding/binary"
	"errors"
	"fmt"
)

var (
	bucketKey  = []byte("key")
	bucketMeta = []byte("meta")
	// CompactKeys are the meta bucket's keys that hold the compaction
	// revisions.
	CompactKeys = [][]byte{[]byte("finishedCompactRev"), []byte("scheduledCompactRev")}
)

// Revision reads the revision of the database at path, as DB.Revision
// does.
func Revision(path string) (int64, error) {
	db, err := Open(path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = db.Close() }()
	return db.Revision()
}

// Revision is the newest revision in the key bucket, raised to the
// compaction revisions (a compaction may have removed the newest
// revision's tombstones), and at least 1: what etcd's mvcc store starts
// at when it opens the database.
func (db *DB) Revision() (int64, error) {
	rev := int64(1)
	keys, err := db.Bucket(bucketKey)
	if err != nil {
		return 0, err
	}
	if keys == nil {
		return 0, db.fail(errors.New("no key bucket: not an etcd v3 database"))
	}
	k, _, err := keys.Cursor().Last()
	if err != nil {
		return 0, err
	}
	if k != nil {
		r, err := Main(k)
		if err != nil {
			return 0, db.fail(fmt.Errorf("key bucket: %w", err))
		}
		rev = max(rev, r)
	}
	meta, err := db.Bucket(bucketMeta)
	if err != nil || meta == nil {
		return rev, err
	}
	for _, name := range CompactKeys {
		v, err := meta.Get(name)
		if err != nil {
			return 0, err
		}
		if v != nil {
			r, err := Main(v)
			if err != nil {
				return 0, db.fail(fmt.Errorf("meta %s: %w", name, err))
			}
			rev = max(rev, r)
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

// Tombstone says whether a key bucket's key marks a deletion.
func Tombstone(k []byte) bool { return len(k) == 18 && k[17] == 't' }
