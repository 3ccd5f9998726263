// Package monitoring holds etcdkit's Prometheus alerting rules
// (etcdkit-rules.yaml) and Grafana dashboards (etcdkit-dashboard.json for
// the sidecars, etcdkit-fleet-dashboard.json for etcd-backup fleet serve),
// and their checks: the rules parse as Prometheus parses them, every
// expression of the rules and the dashboards parses as PromQL, and every
// etcdkit metric they name is one the sidecar or fleet serve exports
// (metrics.txt and fleet-metrics.txt, which their own tests hold to their
// registries). It is a module of its
// own so that Prometheus' rule parser stays out of etcdkit's dependencies.
package monitoring
