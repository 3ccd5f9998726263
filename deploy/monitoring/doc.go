// Package monitoring holds etcdkit's Prometheus alerting rules
// (etcdkit-rules.yaml) and Grafana dashboard (etcdkit-dashboard.json),
// and their checks: the rules parse as Prometheus parses them, every
// expression of the rules and the dashboard parses as PromQL, and every
// etcdkit metric they name is one the sidecar exports (metrics.txt, which
// the sidecar's own test holds to its registry). It is a module of its
// own so that Prometheus' rule parser stays out of etcdkit's dependencies.
package monitoring
