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
//     a URL; file:// and mem:// here, cloud backends in store/s3, store/gcs,
//     store/azure and store/swift, registered by importing them (store/all
//     imports every one);
//     store/storetest is the conformance suite every backend passes.
//   - tlsfiles: TLS configurations from PEM files, read again when they
//     change; etcdclient: the one way to connect to etcd (endpoints, TLS,
//     etcd's authentication, timeouts), which every package and binary uses.
//   - etcdversion: etcd's releases as facts; validate: checks of a data dir
//     that end in a verdict (a leaf); upgrade: whether a cluster may step
//     one minor.
//   - member: the membership calls on a running cluster (inspect, leader,
//     add a learner, promote, remove), with etcd's retries (a leaf).
//   - snapshot: the on-store format, etcd-backup-restore's v2 layout and
//     the records under etcdkit/ (FORMAT.md): names, codecs, chains, the
//     catalog, retention, copies to a second site. Nothing in it talks to
//     etcd.
//   - capture: backups taken from a live cluster: Full, Delta, the
//     Snapshotter loop, the datastores (etcd, kine) and Place, which decides
//     whether a cluster continues a chain or begins a timeline.
//   - restore: a chain into a member data dir, replayed directly on etcd's
//     mvcc backend, point-in-time, a warm standby; Replay, the one replay
//     engine the packages above read the past through.
//   - history: the past read from backups (get, diff, verify, digests);
//     tenant: a past state written into a live cluster (apply, undelete,
//     move); compact: a chain folded into one new full; drill: restore
//     drills against the cluster or a recorded digest; fleet: many
//     clusters' backups in one bucket.
//   - defrag: defragmentation of a live cluster, followers first, the
//     leader last.
//   - startup: how a member starts, decided once for every division
//     (restart, bootstrap, join, rejoin, restore, refuse) and carried out;
//     recovery of a cluster that lost quorum.
//   - heartbeat: the Kubernetes leases etcd-druid reads.
//   - sidecar: the backup sidecar (uploader beside the leader, HTTP API,
//     metrics) that etcd-backup serve runs; sidecar/api: the API's types
//     and client, standard library only; sidecar/etcdbr: etcd-backup-restore's
//     protocol over it, for etcd-druid.
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
// locks and free space per OS, internal/etcdstorage is the one package
// that calls etcd's server internals (the backend a restore writes, a new
// member's WAL and snap files, the log an upgrade check reads),
// internal/database reads an etcd database without bbolt (its revision, a
// bucket's keys), internal/frames decodes
// compressed frames in parallel, internal/reload reads rotated files
// again, and internal/scratch holds work directories.
package etcdkit
