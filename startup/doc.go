// Package startup decides how an etcd member starts and prepares its data
// dir for it: the one procedure behind the wrapper in every division, the
// sidecar's restore-if-needed API and quorum-loss recovery.
//
// Prepare runs it: the data dir's verdict and what the backups hold
// (Source.Check), the live cluster's answer (Decide asks the endpoints),
// one decision table (restart, bootstrap, join as a learner, rejoin,
// restore, or refuse), then the action: a restore through the Source, the
// membership changes of a join or rejoin (Apply), or a refusal that says
// why. Where the data comes from is the Source: Local validates, reads
// the store's catalog once and restores in this process; Remote asks a
// sidecar's API to do the same. Whoever executes, the same table decides.
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
