// Package startup decides how an etcd member starts and prepares its data
// dir for it: the one procedure behind the wrapper in every division, the
// sidecar's restore-if-needed API and quorum-loss recovery.
//
// It runs in two steps. Assess makes the plan: the data dir's verdict and
// what the backups hold (Preparer.Check), the rebuild of a lone member's
// data dir that etcd 3.5 wrote, the live cluster's answer (Decide asks the
// endpoints) and one decision table (restart, bootstrap, join as a
// learner, rejoin, restore, or refuse with the Remedies that would let the
// member start), deciding again while the plan is to wait. Carry carries
// it out: a restore through the Preparer, the membership changes of a join
// or rejoin (Apply), or a *Refusal that says why. Prepare is both. Where
// the data comes from is the Preparer: Local validates, reads the store's
// catalog once and restores in this process; Remote asks a sidecar's API
// to do the same; EtcdBR leaves restores to an etcd-backup-restore
// sidecar. Whoever executes, the same plan decides: the sidecar's
// restore-if-needed runs Assess and restores when it says so.
// RecoverQuorum rebuilds a cluster that lost quorum from the backups.
//
// It never starts a member with an empty data dir as part of a new
// cluster while a cluster with other members answers: that is how a
// cluster splits in two. A member that lost its data rejoins as a
// learner, so it cannot vote before it holds the log again. Every data
// dir it replaces is moved aside, never deleted.
//
// It does not start etcd (the caller does, with the plan's initial
// cluster and state), judge a data dir (package validate), rebuild one
// (package restore) or make membership calls of its own (package member).
package startup
