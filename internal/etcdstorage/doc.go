// Package etcdstorage is the one package of etcdkit that calls etcd's
// server internals: its storage as etcd's own code reads and writes it.
// It holds the mvcc backend a restore replays into and reads the past from
// (Backend), a new member's database, WAL and raft snapshot with what its
// release refuses of the database taken out (MakeDataDir, Rebuild), and
// the WAL and v2 store a stopped member's upgrade check reads (ReadLog).
//
// What it owns is the mapping onto etcd's internals, nothing of the
// decisions: which revisions to write, which leases to grant, when a
// restore may replace a data dir are package restore's; whether a member
// may step a release is package upgrade's. Running a member goes through
// etcd's public embedding API (embed), in wrapper and etcdtest, not here.
// A release of etcd that moves its internals changes this package alone.
package etcdstorage
