// Package restore turns backups on a store back into etcd data.
//
// Restore picks a chain (the latest, the one reaching a revision, or the
// state as of a time), checks it for gaps before any work, downloads the
// full snapshot and the deltas in parallel with a bounded window on disk,
// and replays the deltas straight into the full snapshot's bbolt file
// through etcd's own mvcc store: one write transaction per original
// revision, each checked to land on that revision. Leases the deltas
// recorded are granted again with their TTLs, and the users and roles they
// recorded last written; SafeBump estimates how far an automated restore
// raises the revision past what the lost cluster served. etcdutl's snapshot
// restore then makes the file a member data dir, built beside the target
// and exchanged with it in one step; an existing data dir is moved aside,
// never deleted. A lock beside the target keeps two restores of it apart
// and lets the next one clear what a killed one left. No etcd server runs
// at any point.
//
// Verify does the same replay without a data dir and sums the keyspace;
// LiveDigest sums a live cluster the same way, so equal digests prove a
// backup exact. Consolidate folds a chain into one new full snapshot.
//
// It does not choose which member restores or when (package startup
// does), and it does not write snapshots, except through package
// snapshot. The data dir's locks and free space are internal/datadir's.
package restore
