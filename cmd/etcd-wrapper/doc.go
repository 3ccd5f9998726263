// Command etcd-wrapper is etcdkit's reference etcd wrapper: it prepares a
// member's data dir, starts etcd embedded and serves its probes. It only
// wires flags to package wrapper.
package main
