// Package capture takes backups from a running etcd cluster: the
// Snapshotter, the loop that takes full snapshots on a schedule and writes
// the watch stream as deltas in between, and Delta, one pass of the same
// capture for a command that runs once.
//
// It owns what only a live cluster can tell: the watch (bounded in memory:
// at the limit the watch pauses and etcd keeps the backlog), the TTLs of
// the leases the events name and the leases revoked, the users and roles
// when they change, and the guard that stops an uploader whose cluster was
// replaced (its raft index went back). Before each
// object it checks that its timeline is still the newest and that no newer
// run recorded itself as the prefix's uploader.
//
// It does not own the format: names, codecs, writing objects, the catalog,
// timelines and their placing, identity and uploader records and retention
// are package snapshot's, which capture calls (Full, WriteDelta, Place, GC).
// It does not decide which member uploads: a caller that shares a store
// between members fences through BeforeUpload.
package capture
