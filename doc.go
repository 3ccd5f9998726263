// Package etcdkit keeps etcd members alive and their data safe.
//
// Every responsibility is a small package that any binary can import, so a
// deployment decides which process does what: the etcd wrapper can check and
// restore its own data dir, a backup sidecar can do it for the wrapper, or one
// process can do everything.
//
// The map of packages:
//
//   - store: the object store contract (Put, Get, List, Delete), opened from
//     a URL; file:// and mem:// here, cloud backends in store/s3, store/gcs
//     and store/azure, registered by importing them; store/storetest is the
//     conformance suite every backend passes.
//   - snapshot: full and delta snapshots on a store in etcd-backup-restore's
//     v2 layout, chains, codecs and retention.
//   - restore: a chain into a member data dir, replayed directly on etcd's
//     mvcc backend; point-in-time restore, verify and compaction of a chain.
//   - validate: checks of a data dir that end in a verdict.
//   - member: membership decisions and actions (bootstrap, join as learner,
//     promote, rejoin) and recovery of a cluster that lost quorum.
//   - defrag: defragmentation of a live cluster, followers first, the
//     leader last.
//   - etcdclient: the one way to connect to etcd (endpoints, TLS, etcd's
//     authentication, timeouts), which every package and binary uses;
//     tlsfiles: TLS configurations from PEM files, read again when they
//     change.
//   - sidecar: the backup sidecar (uploader beside the leader, HTTP API,
//     metrics) that etcd-backup serve runs.
//   - wrapper: one member started safely (strict configuration, verdict,
//     restore or rejoin, probes) that etcd-wrapper runs.
//   - cmd/etcd-wrapper and cmd/etcd-backup: the reference binaries.
//   - examples: runnable divisions of responsibility between them.
//
// internal/etcdtest starts real embedded etcd members for the tests (with
// TLS and authentication when asked), internal/pki issues certificates for
// the tests and examples, internal/emulator starts the cloud store
// emulators the tests run against, internal/datadir moves replaced data
// dirs aside, internal/reload reads rotated files again, and internal/cli
// holds what the two binaries share to read their flags.
package etcdkit
