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
// database itself. A delta is the JSON array of watch events received
// after the previous snapshot, followed by the SHA-256 of that JSON, and
// never splits a revision. Its events carry, in fields etcd-backup-restore's
// decoder ignores, what the watch stream does not: the granted TTL of each
// lease they name first, the leases revoked since, and the users and roles
// once they changed. Objects are compressed (gzip, zstd; zlib and
// LZW are read) and then optionally encrypted with age.
//
// The package also owns the catalog (List, Chain selection and Check),
// retention (GC with the Exponential and LimitBased policies) and the
// Snapshotter, the loop that takes full snapshots on a schedule and deltas
// in between.
//
// It does not restore: replaying a chain into a data dir is package
// restore's, which reads objects through Open and OpenDelta. It does not
// decide who uploads: a caller that shares a store between members fences
// through BeforeUpload.
package snapshot
