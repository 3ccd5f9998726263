// Package sidecar is the backup sidecar as a library: what
// `etcd-backup serve` runs, and what an all-in-one process embeds.
//
// A Sidecar follows its own etcd member. Only the sidecar beside the
// leader is the uploader: it runs the capture.Snapshotter, defragments on
// a schedule, consolidates the backup chain when it grows long, and
// re-checks right before every upload that its member still leads
// (fencing), so two sidecars never upload overlapping work for long. Every
// sidecar promotes its member when it is a learner that has caught up,
// validates and restores data dirs on request with package startup's
// Local source (so a wrapper that leaves its data dir to the sidecar
// decides with the same table), and serves the HTTP API with its metrics;
// followers forward mutating calls to the uploader's sidecar.
//
// Without a store it takes no snapshots and does the rest.
//
// Serve listens (TLS when given), runs the sidecar and drains the API at
// exit; Handler mounts the API in a server of the caller's. Either needs
// a credential (Auth): a sidecar that serves no API needs none. The API's
// types and client are package sidecar/api, apart from this server;
// etcd-backup-restore's protocol over a Sidecar is package sidecar/etcdbr
// (Serve takes its handler in ServeOptions.Handler).
//
// It does not start or stop etcd (the wrapper does), and it holds no
// logic of snapshots, restores, start-up or defragmentation of its own:
// those are packages snapshot, restore, startup, member and defrag.
package sidecar
