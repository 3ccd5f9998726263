// Package kubernetes holds the reference Kubernetes manifests — etcd.yaml
// (a StatefulSet of etcd-wrapper and etcd-backup serve), rbac.yaml (the
// sidecars' service account and the Role of their leases) and
// etcd-druid.yaml (the pod spec etcd-druid builds, with etcd-backup server
// in etcd-backup-restore's place) — and the tests that check them against
// the binaries, the configuration loaders and a real kube-apiserver
// (kubectl apply --dry-run=server). It has no code of its own.
package kubernetes
