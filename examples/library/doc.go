// Library is the smallest program that backs up a cluster and restores
// the backup with etcdkit's packages: one full snapshot to a store, then
// that snapshot made a new member's data dir.
//
//	go run ./examples/library -endpoints http://127.0.0.1:2379 -store file:///tmp/backups -data-dir /tmp/restored
package main
