// Package datadir holds what more than one package does to a member's
// data dir as a whole: holding it against a running etcd, replacing it,
// moving it aside. A data dir in use is never deleted: one that is
// replaced is moved aside, where an operator can still reach it, and only
// the oldest moved-aside ones beyond a count are pruned.
package datadir
