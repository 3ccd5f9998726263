// Package scratch makes the temporary files and directories etcdkit's
// long operations work in (spooled snapshots, staged objects, chains being
// replayed) so that those of a process that died — killed mid-upload,
// mid-compaction — are removed by the next one instead of filling the
// disk. Each is held under a lock for its owner's life (Linux); one whose
// lock can be taken, and that is not brand new, belongs to nobody.
// Elsewhere nothing is swept.
package scratch
