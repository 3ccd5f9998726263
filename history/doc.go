// Package history reads the past from backups, without touching a
// cluster: the keys as they were at a revision or a time (ReadState, or
// two revisions at once for a diff: ReadStates), what changed between two
// states (Diff), a state's keys counted by sub-prefix (Summarize), and
// Verify, which replays a chain and sums its keyspace (Digest); LiveDigest
// sums a live cluster the same way, so equal digests prove a backup exact.
//
// Every read replays the chain through package restore's Replay, the one
// replay engine. It does not write anywhere: writing a past state into a
// live cluster is package tenant's, building a data dir package restore's.
package history
