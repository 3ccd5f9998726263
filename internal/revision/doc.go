// Package revision reads the revision of an etcd bbolt database the way
// etcd's mvcc store does when it opens one. Package validate (which judges
// a data dir) and package snapshot (which names and checks full
// snapshots) share it, so neither imports the other.
//
// It reads; it never opens a database for writing.
package revision
