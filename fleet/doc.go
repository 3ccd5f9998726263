// Package fleet looks at many clusters' backups in one bucket, a prefix
// each (Gardener keeps a seed's clusters so): it finds every prefix that
// holds etcdkit or etcd-backup-restore backups with one listing of the
// bucket, sums up each (its cluster, newest full and delta, RPO, chain,
// bytes, restore estimate, last drill, whether it went stale), serves that
// as Prometheus metrics, and drills a sample of the prefixes far from
// their clusters, against the digests their sidecars' drills recorded.
//
// It owns the view across prefixes. It does not own the on-store format
// (snapshot), replaying a chain (restore) or a store's backends (store).
package fleet
