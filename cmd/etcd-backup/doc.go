// Command etcd-backup is etcdkit's reference backup sidecar (serve) and
// the operator's tool for the backups of one etcd cluster. It only wires
// flags to etcdkit's packages.
package main
