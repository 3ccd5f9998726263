// Package defrag defragments the members of a live cluster safely: only
// when every member answers, followers one at a time and the leader last,
// with a pause between members so the cluster never has two members busy
// at once, and a policy that skips members with little to reclaim. It can
// compact the keyspace first and disarm a NOSPACE alarm once the space is
// back.
//
// It does not decide when to run (the sidecar's schedule or an operator
// does) and does not compact backup chains (package restore does).
package defrag
