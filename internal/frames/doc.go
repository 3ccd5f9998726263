// Package frames finds the independent blocks of a compressed full
// snapshot and decodes them on every core: the gzip members etcdkit writes
// (each names its own length in its header's extra field, so the next one
// is found without inflating this one) and zstd frames (whose block headers
// give their lengths). Package snapshot writes such streams and reads them
// through Reader; the bench measures the floor of a restore with Split.
//
// It owns the framing only: which compression a snapshot has, its
// encryption and its trailer belong to package snapshot. A stream it
// cannot split (etcd-backup-restore's single gzip member, a zstd frame
// without its size) is decoded from that point on one core, as before.
package frames
