// Package snapshot is the on-store format: what backups are on a store and
// how to read and write them. Nothing in it talks to etcd (package capture
// reads a live cluster); everything in it works on a store alone.
//
// It owns etcd-backup-restore's v2 layout, so either tool reads the
// other's backups:
//
//	v2/Full-<start %08d>-<last %08d>-<unix>[.gz|.zst][.age][.final]
//	v2/Incr-<start %08d>-<last %08d>-<unix>[.gz|.zst][.age][.final]
//
// A full snapshot is an etcd bbolt database with etcd's SHA-256 trailer,
// named with the revision read from the database itself (WriteFull); a
// logical full (SourceEtcdAPI: a datastore such as kine behind etcd's API)
// is one built from a Range, marked as such (IsLogical, Logical). A delta
// is the JSON array of watch events received after the previous snapshot,
// followed by the SHA-256 of that JSON, and never splits a revision. Its
// events carry, in fields etcd-backup-restore's decoder ignores, what the
// watch stream does not: the granted TTL of each lease they name first,
// the leases revoked since, and the users and roles once they changed.
// Objects are compressed (gzip, zstd; zlib and LZW are read) and then
// optionally encrypted with age (Codec).
//
// Beside the objects, the records etcdkit writes under etcdkit/ (FORMAT.md
// lists every one with its JSON, writer and readers): timelines (a cluster
// restored to another past begins one; every object belongs to the newest
// timeline begun when it was created), each full's cluster identity and
// the keys its last revisions left (FullTail, DeltaTail: what a cluster
// that continues the chain holds), restores, uploader runs, drills, the
// site and mirror marks and the write-once probe. Every object is written
// once (the store's Put is create-only); a name taken by other bytes is
// ErrConflict.
//
// And reading them: the catalog (List, a timeline's view, Chain selection
// and Check), Open and OpenDelta; retention (GC with the Exponential and
// LimitBased policies, each timeline apart; what a write-once lock keeps
// is reported, not failed); Copy to a second site; Extend (the latest full
// copied to renew its lock).
//
// It does not take backups of a cluster (package capture: fulls, deltas,
// the decision whether a cluster continues a chain or begins a timeline)
// and does not restore (package restore builds data dirs from chains).
package snapshot
