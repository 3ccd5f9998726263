// Package member owns an etcd cluster's membership as one member sees it
// at start-up and while it runs: which members there are and how they are
// (Inspect), whether this one leads (AskSelf, Follow), what this member must do before etcd starts given its data
// dir's verdict and the live cluster (Decide, then Apply), the membership
// calls with the retries etcd makes necessary (AddLearner,
// PromoteWhenReady, Remove, UpdatePeerURLs), and the recovery of a
// cluster that lost quorum from a backup (RecoverQuorum).
//
// It never starts a member with an empty data dir as part of a new
// cluster while a cluster with other members answers: that is how a
// cluster splits in two. A member that lost its data rejoins as a
// learner, so it cannot vote before it holds the log again.
//
// It does not start etcd (the caller does, through the plan's
// initial-cluster and state), judge a data dir (package validate) or
// restore one (package restore, which RecoverQuorum calls).
package member
