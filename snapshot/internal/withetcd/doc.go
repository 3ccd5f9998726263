// Package withetcd holds the on-store format to etcd's own types: the
// events a delta records marshal as etcd's watch events do, so that
// etcd-backup-restore reads etcdkit's deltas and etcdkit reads its. It is
// a module of its own so that etcd's API stays out of the graph of an
// embedder of package snapshot.
package withetcd
