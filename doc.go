// Package etcdkit keeps etcd members alive and their data safe.
//
// Every responsibility is a small package that any binary can import, so a
// deployment decides which process does what: the etcd wrapper can check and
// restore its own data dir, a backup sidecar can do it for the wrapper, or one
// process can do everything. ARCHITECTURE.md draws the map with the allowed
// import directions and the backup and start-up flows.
//
// The map of packages, from the bottom up:
//
//   - store: the object store contract (Put, Get, List, Delete), opened from
//     a URL; file:// and mem:// here, cloud backends in store/s3, store/gcs
//     and store/azure, registered by importing them; store/storetest is the
//     conformance suite every backend passes.
//   - tlsfiles: TLS configurations from PEM files, read again when they
//     change; etcdclient: the one way to connect to etcd (endpoints, TLS,
//     etcd's authentication, timeouts), which every package and binary uses.
//   - validate: checks of a data dir that end in a verdict (a leaf).
//   - member: the membership calls on a running cluster (inspect, leader,
//     add a learner, promote, remove), with etcd's retries (a leaf).
//   - snapshot: full and delta snapshots on a store in etcd-backup-restore's
//     v2 layout, chains, codecs, retention and the Snapshotter.
//   - restore: a chain into a member data dir, replayed directly on etcd's
//     mvcc backend; point-in-time restore, verify and consolidation of a
//     chain into a new full.
//   - defrag: defragmentation of a live cluster, followers first, the
//     leader last.
//   - startup: how a member starts, decided once for every division
//     (restart, bootstrap, join, rejoin, restore, refuse) and carried out;
//     recovery of a cluster that lost quorum.
//   - sidecar: the backup sidecar (uploader beside the leader, HTTP API,
//     metrics) that etcd-backup serve runs; sidecar/api: the API's types
//     and client, standard library only.
//   - wrapper: one member started safely (strict configuration, the
//     start-up, probes) that etcd-wrapper runs.
//   - etcdtest: real embedded etcd members for tests (with TLS and
//     authentication when asked), for this module's tests and for users
//     who assemble a division of their own.
//   - cmd/etcd-wrapper and cmd/etcd-backup: the reference binaries, with
//     cmd/internal/cli, what they share to read their flags.
//   - examples: runnable divisions of responsibility between them.
//
// internal/pki issues certificates for the tests and examples,
// internal/emulator starts the cloud store emulators the tests run
// against, internal/datadir moves replaced data dirs aside and owns their
// locks and free space per OS, internal/revision reads a database's
// revision, internal/reload reads rotated files again, and
// internal/scratch holds work directories.
package etcdkit
