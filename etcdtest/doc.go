// Package etcdtest starts real etcd members in the test process, through
// go.etcd.io/etcd/server/v3/embed, on loopback addresses with ports picked
// free at start: one member or a cluster of several, ready before the caller
// sees them.
//
// It owns the life of those members (start, graceful stop, hard stop,
// restart on the same data dir and URLs, adding a member to a running
// cluster or starting one as a membership decision says, moving the
// leader), members served over TLS with client certificates required and
// with etcd's authentication on (Security holds the certificates and the
// users' password files), a seeded workload writer whose expected end
// state tests can compare with what a restore or a watch produced, and a
// write load that counts failed writes.
//
// It is public for users who assemble a division of their own and need
// real members in their tests; Reserve picks the URLs and data dirs of a
// cluster a test then starts its own way (a wrapper per member, say).
// No product package imports it. A hard stop here stops the member
// without leader transfer and without a graceful shutdown, but it runs in
// the same process, so it cannot tear a write the way SIGKILL of a
// separate process can; tests that need that run real processes.
package etcdtest
