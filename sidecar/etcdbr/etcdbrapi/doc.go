// Package etcdbrapi is the client side of etcd-backup-restore's HTTP
// protocol, standard library only: the initialization a wrapper asks of an
// etcd-backup-restore sidecar (ours in package etcdbr, or etcd-backup-restore
// itself) before it starts etcd, and the states the sidecar reports.
//
// It owns the wire: what to do with a prepared data dir is package
// startup's.
package etcdbrapi
