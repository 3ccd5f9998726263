// Package heartbeat keeps the Kubernetes Lease objects that tell
// etcd-druid, and anyone reading the API server, how a member and its
// backups are doing, in etcd-backup-restore's format:
//
//   - the member lease, named after the member: holder identity
//     "<member ID hex>:<cluster ID hex>:Leader|Member", the annotation
//     member.etcd.gardener.cloud/tls-enabled (all of the member's peer URLs
//     are https), renewed every period while the member answers;
//   - the full-snapshot lease: holder identity the last revision of the
//     latest full snapshot, never going back, renew time the snapshot's;
//   - the delta-snapshot lease: holder identity the last revision of the
//     latest delta (0 before the first), never going back, renewed while
//     the backups succeed.
//
// Leases writes one Lease; Run keeps all three from a Source (a sidecar).
// An API server that is down or refuses is logged, counted and tried
// again: a heartbeat never holds a backup up. RESTConfig finds the API
// server as a pod or a kubeconfig does.
//
// It does not take snapshots or follow the member (package sidecar does),
// and it does not create the Role that lets it write (deploy/kubernetes).
// These are Kubernetes Leases, not etcd's leases.
package heartbeat
