// Package sidecar is the backup sidecar as a library: what
// `etcd-backup serve` runs, and what an all-in-one process embeds.
//
// A Sidecar follows its own etcd member. Only the sidecar beside the
// leader is the uploader: it runs the snapshot.Snapshotter, defragments on
// a schedule, compacts the backup chain when it grows long, and re-checks
// right before every upload that its member still leads (fencing), so two
// sidecars never upload overlapping work for long. Every sidecar promotes
// its member when it is a learner that has caught up, restores data dirs
// on request, and serves the HTTP API (Handler) with its metrics;
// followers forward mutating calls to the uploader's sidecar.
//
// It does not start or stop etcd (the wrapper does), and it holds no
// logic of snapshots, restores or defragmentation of its own: those are
// packages snapshot, restore, validate, member and defrag.
package sidecar
