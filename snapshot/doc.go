// Package snapshot takes etcd backups and describes them on a store.
//
// It owns the on-store format, which is etcd-backup-restore's v2 layout so
// either tool reads the other's backups:
//
//	v2/Full-<start %08d>-<last %08d>-<unix>[.gz|.zst][.age][.final]
//	v2/Incr-<start %08d>-<last %08d>-<unix>[.gz|.zst][.age][.final]
//
// A full snapshot is the bbolt database etcd's Maintenance.Snapshot streams,
// with etcd's SHA-256 trailer; it is named with the revision read from the
// database itself. What a backup needs of its datastore is a Source: an
// etcd cluster, or a datastore that serves etcd's KV and Watch API without
// its snapshot RPC (SourceEtcdAPI: kine over SQLite, Postgres or MySQL),
// whose full is logical: a database of etcd's layout built here from a
// paginated Range at one revision, compacted there, marked in its meta
// bucket and its identity record with what it cannot hold (history,
// versions, lease TTLs the datastore does not answer, auth). A delta is the JSON array of watch events received
// after the previous snapshot, followed by the SHA-256 of that JSON, and
// never splits a revision. Its events carry, in fields etcd-backup-restore's
// decoder ignores, what the watch stream does not: the granted TTL of each
// lease they name first, the leases revoked since, and the users and roles
// once they changed. Objects are compressed (gzip, zstd; zlib and
// LZW are read) and then optionally encrypted with age.
//
// The package also owns the history's integrity: timelines (a cluster
// restored to another past begins one, recorded under etcdkit/timelines/;
// every object belongs to the newest timeline begun when it was created),
// the records of each full's cluster, of each restore and of each uploader
// run, and Place, which decides from them and from the cluster's own keys
// whether a cluster may append to the newest chain, must begin a timeline,
// or is another cluster's. Every object is written once (the store's Put is
// create-only); a name taken by other bytes is ErrConflict.
//
// And the catalog (List, a timeline's view, Chain selection and Check),
// retention (GC with the Exponential and LimitBased policies, each timeline
// apart; what a write-once lock keeps is reported, not failed), Full (one
// full snapshot streamed from a member), WriteDelta (events written as a
// delta), Extend (the latest full copied to renew its lock) and
// ProbeProtection (whether the store refuses deletes).
//
// It does not watch etcd: the Snapshotter loop and delta capture, with the
// lease and auth records a delta carries and the checks before each
// object, are package snapshot/capture's. It does not restore: replaying a
// chain into a data dir is package restore's, which reads objects through
// Open and OpenDelta.
package snapshot
