// Package validate checks an etcd data dir and returns a verdict — Valid,
// Empty, Corrupt, Behind, WrongVolume or Locked — with the check and the
// file that decided it, the revisions involved and how long each check
// took. It never modifies the data dir.
//
// It owns the checks (DataDir), the guard file that ties a data dir to its
// member and cluster (WriteGuard), and the mapping of a verdict to an
// action (Decide). It does not act on a verdict: restoring is package
// restore's, membership changes are package member's, and the wrapper
// decides when to validate.
package validate
