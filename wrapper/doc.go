// Package wrapper runs one etcd member the way etcdkit's reference wrapper
// does: it loads etcd's configuration file strictly (LoadConfig), runs the
// start-up (package startup) with the Preparer its division gives — a
// startup.Local store in this process, the sidecar's API (startup.Remote)
// or an etcd-backup-restore sidecar (startup.EtcdBR) — starts etcd embedded with the plan's initial cluster and state, serves
// health endpoints, promotes itself when it joined as a learner, and on
// stop leaves a clean-shutdown marker and the volume guard. It reaches its
// own member and the others as etcd's configuration says (ClientConn:
// client-transport-security's CA bundle and client certificate), so a
// member with TLS clients and peers needs nothing more.
//
// It does not take snapshots or defragment (package sidecar does), and it
// holds no logic of validation, restore, start-up or membership of its own.
package wrapper
