package etcdstorage

import (
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.etcd.io/etcd/server/v3/storage/schema"
)

// The buckets of an etcd database and the meta keys of its compaction, as
// etcd's schema names them, for a copy that reads the file with bbolt
// itself. Read only.
var (
	KeyBucket   = schema.Key.Name()
	MetaBucket  = schema.Meta.Name()
	LeaseBucket = schema.Lease.Name()
	RoleBucket  = schema.AuthRoles.Name()
	UserBucket  = schema.AuthUsers.Name()
	CompactKeys = [][]byte{schema.ScheduledCompactKeyName, schema.FinishedCompactKeyName}
)

// RevisionKey is the key bucket's key of main revision main.
func RevisionKey(main int64) []byte {
	return mvcc.RevToBytes(mvcc.Revision{Main: main}, mvcc.NewRevBytes())
}

// RevisionOf reads a key bucket's key (a tombstone's has a mark after
// it).
func RevisionOf(k []byte) (main, sub int64) {
	r := mvcc.BytesToRev(k)
	return r.Main, r.Sub
}
