// All-in-one runs an etcd member and its backup sidecar in one process:
// the wrapper prepares the data dir (restoring from the store when it
// must) and starts etcd, the sidecar backs it up, and at the end the
// sidecar uploads its last delta before etcd stops, which two containers
// cannot order.
//
// With -config and -peer-endpoints it is one member of a larger cluster,
// and starts as the wrapper would in any division (package startup).
//
//	go run ./examples/all-in-one -store file:///tmp/backups [-config etcd.yaml [-peer-endpoints URLs]] [-for 30s]
package main
