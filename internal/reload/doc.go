// Package reload keeps a value loaded from files on disk, and loads it
// again when one of the files changes: a rotated secret (a token, a
// certificate and its key, a CA bundle) takes effect without a restart.
//
// A change is a new modification time, size or file behind the path, so a
// Kubernetes Secret volume, which swaps a symlink to new files, counts. A
// change that does not load (a certificate written before its key, during
// a rotation) keeps the last good value and is logged once; the value is
// loaded again at the next change.
//
// It owns that rule only: what the files mean is the caller's.
package reload
