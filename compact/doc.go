// Package compact folds a chain into one new full snapshot (Compact): the
// chain replayed through package restore's Replay, compacted at its last
// revision and defragmented in one copy, uploaded as a full of the same
// timeline with the chain's cluster identity. It is what etcd-backup
// compact, the sidecar's --compact-after and the API's /v1/compact run
// (etcd-backup-restore's word for it).
//
// "Compact" here is always a chain's: etcd's own keyspace compaction,
// which a defragmentation may run first, is defrag.Options.CompactKeyspace.
// It deletes nothing: retention (snapshot.GC) removes the old chain later.
package compact
