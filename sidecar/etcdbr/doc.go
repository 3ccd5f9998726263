// Package etcdbr serves etcd-backup-restore's HTTP protocol over a
// sidecar.Sidecar, so that etcd-druid and Gardener's etcd-wrapper drive
// etcdkit's sidecar unchanged: /initialization/start and /status (the
// start-up procedure of package startup, run here), /config (the member's
// etcd configuration rendered from etcd-druid's ETCD_CONF),
// /snapshot/full, /snapshot/delta and /snapshot/latest (forwarded to the
// uploader's sidecar, found from the etcd leader's client URL as
// etcd-backup-restore finds it), /healthz, and /metrics with
// etcd-backup-restore's etcdbr_* metrics beside etcdkit's own.
//
// Paths, methods, status codes and bodies are etcd-backup-restore's,
// including that the protocol has no authentication: serve it only where
// the pod network alone reaches it.
//
// It owns the protocol and nothing else: the duties are the sidecar's, the
// start-up is package startup's, the flags are cmd/etcd-backup's.
package etcdbr
