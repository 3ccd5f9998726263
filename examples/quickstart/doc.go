// Quickstart shows etcdkit end to end in one process, on the file store in
// a temporary directory: a member started the way etcd-wrapper starts it,
// a sidecar run the way etcd-backup serve runs it, data written and backed
// up (a full snapshot and deltas), the database damaged, the verdict, the
// restore at restart, and every key checked.
//
//	go run ./examples/quickstart
package main
