// Package capture takes backups from a running cluster: Full (one full
// snapshot streamed from a member), Delta (one pass of the watch written
// as deltas, for a command that runs once), and the Snapshotter, the loop
// that takes fulls on a schedule and writes the watch stream as deltas in
// between.
//
// It owns what only a live cluster can tell: the Datastore a backup is
// taken of (an etcd cluster, or a datastore that serves etcd's API
// without its snapshot RPC, whose fulls are built here from a paginated
// Range: logical fulls), the cluster's identity (IdentityOf), Place (does
// this cluster continue the store's newest chain, must it begin a
// timeline, or is the chain another cluster's: one decision table,
// judgeLineage in lineage.go, read by its tests without a cluster, asks
// for the facts it needs and place.go gathers them from the store and the
// cluster, as package startup's table and probes do), the watch (bounded in
// memory: at the limit the watch pauses and etcd keeps the backlog), the
// TTLs of the leases the events name and the leases revoked, the users
// and roles when they change, and the guard that stops an uploader whose
// cluster was replaced (its raft index went back). Before each object it
// checks that its timeline is still the newest and that no newer run
// recorded itself as the prefix's uploader.
//
// It does not own the format: names, codecs, writing objects, the catalog,
// timelines, the records and retention are package snapshot's, which
// capture calls (WriteFull, WriteDelta, GC). It does not decide which
// member uploads: a caller that shares a store between members fences
// through BeforeUpload.
package capture
