// Package soak runs etcdkit as shipped — three etcd-wrapper processes with
// client and peer TLS and etcd auth, an etcd-backup serve beside each, on a
// real store — under traffic like a Kubernetes API server's, injects
// faults of many kinds at random moments, and checks the system against
// an independent record of history: every acknowledged write and every
// event of a watch from the first revision, kept by the harness.
//
// It owns the harness: the processes, the proxies it puts between the
// members (peer traffic) and between the sidecars and the store, the
// traffic, the record, the faults, the invariants and the report. It reads
// restored data dirs with bbolt and etcd's protobufs, not with etcdkit's
// packages, so a bug in etcdkit cannot hide itself.
//
// It does not build a store emulator (package emulator starts one) and
// does not decide anything for etcdkit: it only runs the binaries.
package soak
