// Package validate checks an etcd data dir and returns a verdict — Valid,
// Empty, Corrupt, Behind, WrongVolume or Locked — with the check and the
// file that decided it, the revisions involved and how long each check
// took. It never modifies the data dir.
//
// It owns the checks (DataDir) and the guard file that ties a data dir to
// its member and cluster (WriteGuard). It is a leaf: it reads bbolt, the
// WAL and snap files, and takes the backups' revision as an input rather
// than reading a store. It does not act on a verdict: package startup
// decides what a verdict means for a member.
package validate
