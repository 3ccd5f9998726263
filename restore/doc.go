// Package restore turns backups on a store back into etcd data.
//
// Restore picks a chain (the latest, the one reaching a revision, or the
// state as of a time), checks it for gaps before any work, and decodes the
// full snapshot once, straight into the new data dir's database, while the
// deltas are downloaded (kept compressed, in a bounded window) and decoded
// beside it. The deltas are replayed into that database as etcd's mvcc
// store writes them: each event at its revision and its place in its
// transaction, the KeyValue the watch delivered as the value, the
// revisions checked to follow each other; a member builds its index from
// them when it starts, as after any restart. Leases the deltas recorded
// are granted again with their TTLs, and the users and roles they recorded
// last written; SafeBump estimates how far an automated restore raises the
// revision past what the lost cluster served. etcdutl's steps then make the
// database a member's data dir where it lies (a plain full on a local
// store is handed to etcdutl itself), built beside the target and
// exchanged with it in one step; an existing data dir is moved aside,
// never deleted. A lock beside the target keeps two restores of it apart
// and lets the next one clear what a killed one left. No etcd server runs
// at any point.
//
// Follow keeps a warm standby: the same restore once, into a database
// beside the data dir, then each new delta replayed into it as it lands;
// stopped, it makes a copy of the standby the data dir, as Restore would.
//
// Replay does the same replay in a scratch directory and hands the past
// it reached to a reader (Past: keys at any revision since the full, the
// leases' TTLs, a compacted copy): packages history, tenant and compact
// read the past through it, so every reader of backups replays the same
// way. Options.Prefix makes a data dir of one prefix's keys alone
// (renamed with Rename).
//
// It does not read the past for people (package history: get, diff,
// verify), does not write into live clusters (package tenant), and does
// not fold chains (package compact). It does not choose which member
// restores or when (package startup does), and it does not write
// snapshots. The data dir's locks and free space are internal/datadir's;
// every call into etcd's server internals (the backend, the WAL, the
// membership) goes through internal/etcdstorage.
package restore
