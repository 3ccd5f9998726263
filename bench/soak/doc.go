// Command soak runs etcdkit's fault soak: the shipped binaries as a
// three-member cluster with TLS and auth and a sidecar each, on the S3
// emulator, under traffic and random faults, checked against the
// harness's own record of history (package internal/soak). It prints the
// report and exits 1 when an invariant broke.
//
//	go run ./bench/soak -duration 30m -seed 1
package main
