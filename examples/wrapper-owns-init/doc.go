// Wrapper-owns-init shows the default division of the reference binaries:
// the wrapper validates its data dir and restores it from the store by
// itself; the sidecar only backs up and never takes part in start-up, so
// a member starts even when its sidecar is down.
//
// The two containers would run:
//
//	etcd-wrapper --config etcd.yaml --store s3://bucket/etcd
//	etcd-backup serve --store s3://bucket/etcd --endpoints … --token-file …
//
// This program runs both parts in one process, configured exactly so, and
// puts them through a damaged database.
package main
