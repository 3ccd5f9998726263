// Package etcdclient is the one way etcdkit connects to etcd: every etcd
// client of the module's packages and binaries is made by New, from a
// Config that names the endpoints, the TLS files (read again when they
// change on disk, so certificates rotate without a restart), etcd's
// authentication (a user whose password is read from a file) and the
// timeouts that keep every call bounded.
//
// New checks what it can before it returns: that each https endpoint's
// certificate is one the CA bundle trusts and that the member accepts
// the client certificate, that the user logs in, and, when asked, that
// the user holds etcd's root role, which snapshots, hashes,
// defragmentation and membership changes need. Each failure names the
// file, flag or user to fix, instead of a call that waits out its
// deadline.
//
// It owns connections only: what is done with a client belongs to the
// packages that use it (snapshot, member, defrag, restore's verify).
package etcdclient
