// Package helm holds the Helm chart deploy/helm/etcdkit — etcd-backup
// serve for an etcd cluster run without etcd-druid: from outside an
// external cluster (a Deployment), or beside each member of kubeadm's
// static-pod etcd (a DaemonSet) — and the tests that check it with the
// pinned helm (lint, its values' schema, what it renders) against the
// binary's flags and a real kube-apiserver (kubectl apply
// --dry-run=server). It has no code of its own.
package helm
