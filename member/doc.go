// Package member owns the membership calls on a running etcd cluster, as
// one member sees it: which members there are and how they are
// (Inspect), whether this one leads (AskSelf, Follow), which follower a
// heavy read should load instead of the leader (Follower), and the
// membership changes with the retries etcd makes necessary (AddLearner,
// PromoteWhenReady, Remove, UpdatePeerURLs, Settle).
//
// It takes a connected clientv3 client and imports no other package of
// the project. It does not decide how a member starts, move data dirs or
// restore them: that is package startup, which calls it.
package member
